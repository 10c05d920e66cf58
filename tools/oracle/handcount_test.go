package oracle

import "testing"

// base is a small fp32 GPT-style configuration the hand-counted cases vary.
func base() Config {
	return Config{H: 32, A: 4, KV: 4, FFN: 64, S: 16, B: 2, Vocab: 50, Norm: "layernorm", Attn: "eager",
		Act: "gelu", FinalNorm: true, LossChunks: 1, DType: "fp32", Ckpt: Ckpt{Mode: "none"}}
}

// TestHandCounted checks each sim fix found by the vectors against a
// figure counted by hand from the shapes (b=2, s=16, h=32, a=4, d=8,
// vocab=50): the difference between two replays that differ in one option.
func TestHandCounted(t *testing.T) {
	const b, s, h, d, vocab = 2, 16, 32, 8, 50
	cases := []struct {
		name       string
		with, than func(*Config)
		field      func(Figures) int64
		want       int64
	}{{
		// q and k leave RoPE in fp32 under autocast and the selective region
		// keeps them: 2 tensors x (4 - 2) bytes x b*s*h.
		name:  "rope fp32 under autocast, selective",
		with:  func(c *Config) { c.DType, c.Ckpt, c.Rope = "amp_bf16", Ckpt{Mode: "selective"}, true },
		than:  func(c *Config) { c.DType, c.Ckpt = "amp_bf16", Ckpt{Mode: "selective"} },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  2 * 2 * b * s * h,
	}, {
		// MQA: repeat_kv of one kv head is a view, so SDPA saves k and v at
		// kv width (d) instead of a heads wide copies (h): 2 x 4 B x b*s*(h-d) less.
		name:  "MQA repeat_kv is a view",
		with:  func(c *Config) { c.Attn, c.KV = "sdpa", 1 },
		than:  func(c *Config) { c.Attn = "sdpa" },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  -2 * 4 * b * s * (h - d),
	}, {
		// a trainable lm_head's autocast copy is cached: three chunks save one.
		name:  "chunked head reads one cached weight copy",
		with:  func(c *Config) { c.DType, c.LossChunks, c.LogitsFP32 = "amp_bf16", 3, true },
		than:  func(c *Config) { c.DType, c.LogitsFP32 = "amp_bf16", true },
		field: func(f Figures) int64 { return f.SavedWeightCopies },
		want:  0,
	}, {
		// reentrant full checkpointing after a frozen embedding: the blocks
		// record no graph, so only the final norm (2h) and lm_head (h*vocab)
		// get gradients and AdamW state; non-reentrant trains the blocks.
		name: "reentrant region without grad inputs",
		with: func(c *Config) {
			c.Freeze, c.Ckpt = []string{"embed"}, Ckpt{Mode: "full", Reentrant: true}
		},
		than:  func(c *Config) { c.Freeze, c.Ckpt = []string{"embed"}, Ckpt{Mode: "full"} },
		field: func(f Figures) int64 { return f.OptimizerBytes },
		want:  2*4*(2*h+h*vocab) - 2*4*(2*h+h*vocab+blockParams(h, 64)),
	}, {
		// a tied lm_head is frozen with the embedding: it does not save its
		// input (b*s*h fp32); the frozen embedding does not save the ids
		// (b*s int64).
		name:  "tied lm_head frozen with the embedding",
		with:  func(c *Config) { c.Tie, c.Freeze = true, []string{"embed"} },
		than:  func(c *Config) { c.Tie = true },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  -(4*b*s*h + 8*b*s),
	}, {
		// LoRA on q only: at the first block k and v need no gradient, so
		// q @ k^T does not save q's copy; adding k to the targets saves it
		// (b*s*h fp32) and k's lora_A output (b*s*rank).
		name:  "q @ k^T saves q when k needs a gradient",
		with:  func(c *Config) { c.LoRA = &LoRA{Rank: 1, Alpha: 2, Targets: []string{"q", "k"}} },
		than:  func(c *Config) { c.LoRA = &LoRA{Rank: 1, Alpha: 2, Targets: []string{"q"}} },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  4*b*s*h + 4*b*s*1,
	}, {
		// ... and P @ V saves P (here the dropout output, b*a*s*s fp32)
		// only when v needs a gradient.
		name: "P @ V saves P when v needs a gradient",
		with: func(c *Config) {
			c.AttnDrop, c.LoRA = 0.1, &LoRA{Rank: 1, Alpha: 2, Targets: []string{"q", "v"}}
		},
		than:  func(c *Config) { c.AttnDrop, c.LoRA = 0.1, &LoRA{Rank: 1, Alpha: 2, Targets: []string{"q"}} },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  4*b*4*s*s + 4*b*s*1,
	}, {
		// one sequence: matmul folds (b, heads) of q, k^T and v by a view, so
		// bmm saves the operands' own storages; a fused qkv's v is a view of
		// the whole qkv output, 3h wide (q and k leave RoPE as new tensors).
		name:  "eager attention, one sequence, fused qkv: v keeps qkv",
		with:  func(c *Config) { c.B, c.Rope, c.FusedQKV = 1, true, true },
		than:  func(c *Config) { c.B, c.Rope = 1, true },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  4 * s * (3*h - h),
	}, {
		// two sequences: the folds are copies, fused or not.
		name:  "eager attention, two sequences, fused qkv: copies",
		with:  func(c *Config) { c.Rope, c.FusedQKV = true, true },
		than:  func(c *Config) { c.Rope = true },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  0,
	}, {
		// MQA, one sequence: k and v fold by a view of the one kv head
		// expanded with stride 0: bmm saves the kv projections (d wide),
		// not h wide copies.
		name:  "eager MQA, one sequence: k and v views of one head",
		with:  func(c *Config) { c.B, c.KV = 1, 1 },
		than:  func(c *Config) { c.B = 1 },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  -2 * 4 * s * (h - d),
	}, {
		// autocast, SDPA, MQA with RoPE: k leaves RoPE in fp32 and is
		// expanded to every head by a stride-0 view; its bf16 cast is
		// dense, h wide, as MHA's. v (bf16 from its projection, no cast)
		// stays a d wide view: 2 B x b*s*(h-d) less than MHA.
		name:  "autocast cast of an expanded k materialises every head",
		with:  func(c *Config) { c.DType, c.Attn, c.Rope, c.KV = "amp_bf16", "sdpa", true, 1 },
		than:  func(c *Config) { c.DType, c.Attn, c.Rope = "amp_bf16", "sdpa", true },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  -2 * b * s * (h - d),
	}, {
		// a non-reentrant region that records no graph (LoRA on the MLP:
		// the first block's attention has nothing to train and no input
		// that requires grad) releases its input, as the reentrant region
		// never keeps it: the same bytes.
		name: "non-reentrant region without a graph",
		with: func(c *Config) {
			c.LoRA, c.Ckpt = &LoRA{Rank: 1, Alpha: 2, Targets: []string{"up"}}, Ckpt{Mode: "modules", Modules: []string{"attention"}}
		},
		than: func(c *Config) {
			c.LoRA, c.Ckpt = &LoRA{Rank: 1, Alpha: 2, Targets: []string{"up"}}, Ckpt{Mode: "modules", Modules: []string{"attention"}, Reentrant: true}
		},
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  0,
	}, {
		// torch.chunk(20) of 16 tokens gives 16 chunks of one, as chunk(16).
		name:  "more loss chunks than tokens",
		with:  func(c *Config) { c.LossChunks = 20 },
		than:  func(c *Config) { c.LossChunks = 16 },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  0,
	}, {
		// LoRA on a chunked lm_head trains the same adapters as unchunked.
		name:  "chunked lm_head with LoRA: adapters",
		with:  func(c *Config) { c.LossChunks, c.LoRA = 3, &LoRA{Rank: 2, Alpha: 4, Targets: []string{"lm_head"}} },
		than:  func(c *Config) { c.LoRA = &LoRA{Rank: 2, Alpha: 4, Targets: []string{"lm_head"}} },
		field: func(f Figures) int64 { return f.Trainable },
		want:  0,
	}, {
		// six chunks of 3, 3, 3, 3, 3 and 1 tokens: the five strided chunks
		// are copied by matmul's fold (b*15*h fp32 in all) and their labels
		// by reshape (b*15 int64), the one-token chunk is a view that keeps
		// the whole head input (b*16*h) and the whole labels (b*16); eight
		// chunks of 2 are all copies (b*16*h and b*16 in all) and save two
		// more total_weight scalars (fp32).
		name:  "chunk of one token is a view",
		with:  func(c *Config) { c.LossChunks = 6 },
		than:  func(c *Config) { c.LossChunks = 8 },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  4*b*(s-1)*h + 8*b*(s-1) - 2*4,
	}, {
		// a chunked lm_head with LoRA saves what the unchunked one does
		// (lora_A's chunk copies add up to its input, b*s*h; the labels'
		// chunk copies to the labels), but for two more total_weights.
		name:  "chunked lm_head with LoRA: saved",
		with:  func(c *Config) { c.LossChunks, c.LoRA = 3, &LoRA{Rank: 2, Alpha: 4, Targets: []string{"lm_head"}} },
		than:  func(c *Config) { c.LoRA = &LoRA{Rank: 2, Alpha: 4, Targets: []string{"lm_head"}} },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  2 * 4,
	}, {
		// pure bf16 logits: log_softmax and nll_loss's total_weight in bf16
		// (2 B less per element, and per scalar) than the fp32 upcast's.
		name:  "cross-entropy saves in the logits' dtype",
		with:  func(c *Config) { c.DType = "bf16" },
		than:  func(c *Config) { c.DType, c.LogitsFP32 = "bf16", true },
		field: func(f Figures) int64 { return f.SavedActivations },
		want:  -(2*b*s*vocab + 2),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, c := base(), base()
			tc.with(&a)
			tc.than(&c)
			fa, _, err := Replay(a, 1)
			if err != nil {
				t.Fatal(err)
			}
			fc, _, err := Replay(c, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.field(fa) - tc.field(fc); got != tc.want {
				t.Errorf("difference %d, counted by hand %d", got, tc.want)
			}
		})
	}
}

// blockParams counts one GPT-style block of base(): two layer norms (2h
// each), q, k, v, o (h*h each, no bias) and a gelu MLP (2*h*ffn, no bias).
func blockParams(h, ffn int64) int64 { return 2*2*h + 4*h*h + 2*h*ffn }
