package core_test

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// genPlan is a GRPO plan of a tiny two-layer decoder (4 heads of 64, 2
// key-value heads) with generation settings of its own.
func genPlan(batch, seq, accum, completion, steps int64) *core.Plan {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &nn.Attention{Name: "self_attn", Dim: 256, Heads: 4, KVHeads: 2, Impl: "sdpa", Causal: true}},
		&core.Residual{Layer: &nn.MLP{Dim: 256, Hidden: 1024, Act: "swiglu"}},
	}}
	m := &core.Model{Name: "tiny", Vocab: 1024, Loss: "cross_entropy", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 1024, Dim: 256},
		&core.Repeat{Name: "layers", Layer: block, N: 2},
	}}
	prec, _ := core.LookupPrecision("bf16")
	dev, _ := hw.LookupDevice("H100-80GB")
	rt, _ := core.LookupRuntime("cuda")
	pr := &core.Preference{Trainer: core.TrainerTRL, Loss: core.LossGRPO, TRL: core.TRLFusedHead, Reference: core.RefNone,
		GRPOConfig: core.GRPOConfig{Completion: completion, StepsPerGeneration: steps}}
	return &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: accum, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "full"}, Device: dev, Runtime: rt, Preference: pr}
}

// The generation program: the prefill over the generation batch's
// prompts, each attention layer's keys and values grown to seq - 2 and
// seq - 1 tokens, the sampler's fp32 [G, V] tensors.
func TestLowerGeneration(t *testing.T) {
	for _, c := range []struct {
		name                                 string
		batch, seq, accum, completion, steps int64
		rows, prompt                         int64
		grown                                []int64 // the cache's tokens after the prefill's
	}{
		{"grad accum's generation batch", 2, 96, 4, 32, 0, 8, 64, []int64{94, 95}},
		{"steps_per_generation", 2, 96, 4, 32, 2, 4, 64, []int64{94, 95}},
		{"two tokens: one decode forward", 1, 66, 1, 2, 0, 1, 64, []int64{65}},
		{"one token: the prefill alone", 1, 65, 1, 1, 0, 1, 64, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := genPlan(c.batch, c.seq, c.accum, c.completion, c.steps)
			if !p.Generates() || p.GenerationRows() != c.rows {
				t.Fatalf("Generates %v, GenerationRows %d, want true and %d", p.Generates(), p.GenerationRows(), c.rows)
			}
			prog, gp, err := p.LowerGeneration()
			if err != nil {
				t.Fatal(err)
			}
			if gp.Batch != c.rows || gp.Seq != c.prompt || gp.Phase != core.Eval {
				t.Errorf("lowered %d rows of %d tokens in phase %v, want %d of %d in eval", gp.Batch, gp.Seq, gp.Phase, c.rows, c.prompt)
			}
			var prefill, kept int
			var grown []int64
			for _, v := range prog.Values {
				switch v.Name {
				case "layers.0.self_attn.cache_keys", "layers.1.self_attn.cache_values":
					prefill++
					if v.Shape[0] != c.rows || v.Shape[1] != c.prompt || v.Shape[2] != 128 {
						t.Errorf("%s %v, want [%d %d 128]", v.Name, v.Shape, c.rows, c.prompt)
					}
				case "generate.cache_update":
					if len(grown) == 0 || grown[len(grown)-1] != v.Shape[1] {
						grown = append(grown, v.Shape[1])
					}
				case "generate.next_token_logits", "generate.probs":
					if v.Shape[0] != c.rows || v.Shape[1] != 1024 || v.Dtype != units.FP32 {
						t.Errorf("%s %v %s, want [%d 1024] fp32", v.Name, v.Shape, v.Dtype.Name(), c.rows)
					}
				case "hidden_states_kept":
					kept++
					if v.Bytes != 0 {
						t.Errorf("logits_to_keep = 1 made a copy of %d B, want a view", v.Bytes)
					}
				}
			}
			if prefill != 2 || kept != 1 {
				t.Errorf("%d prefill caches named, %d logits_to_keep, want 2 and 1", prefill, kept)
			}
			if len(grown) != len(c.grown) || (len(grown) > 0 && (grown[0] != c.grown[0] || grown[len(grown)-1] != c.grown[len(c.grown)-1])) {
				t.Errorf("the cache grown to %v tokens, want %v", grown, c.grown)
			}
		})
	}
}

// GenerationRows is one process's prompts: batch x steps_per_generation
// (grad_accum by default), or generation_batch_size over the processes;
// GRPOConfig's own checks refuse a generation_batch_size that is no
// multiple of the global batch, and both set.
func TestGenerationRows(t *testing.T) {
	for _, c := range []struct {
		name                  string
		accum, steps, gbs, dp int64
		rows                  int64
		err                   string
	}{
		{"grad_accum", 4, 0, 0, 1, 8, ""},
		{"steps_per_generation", 4, 2, 0, 1, 4, ""},
		{"generation_batch_size over two processes", 1, 0, 32, 2, 16, ""},
		{"no multiple of the global batch", 1, 0, 30, 2, 0, "is not a multiple of the global batch: batch 2 x 2 processes"},
		{"both", 1, 2, 32, 1, 0, "generation_batch_size and steps_per_generation are both set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := genPlan(2, 96, c.accum, 32, c.steps)
			p.Preference.GRPOConfig.GenerationBatchSize = c.gbs
			if c.dp > 1 {
				p.Parallel = core.Parallelism{DP: c.dp}
			}
			err := p.Validate()
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v, want %q", err, c.err)
			case c.err == "" && err != nil:
				t.Errorf("error %v", err)
			case c.err == "" && p.GenerationRows() != c.rows:
				t.Errorf("%d rows, want %d", p.GenerationRows(), c.rows)
			}
		})
	}
}
