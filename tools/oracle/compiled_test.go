package oracle

import "testing"

// TestCompiledBlocks replays torch.compile's partition of blocks of
// several kinds against what AOTAutograd saves for each (compiled.py with
// the configuration given, torch 2.15.0+cu132 on the CPU; the forward
// graph's outputs past the block's, storages counted once, the block's
// input included, per block).
func TestCompiledBlocks(t *testing.T) {
	gpt2 := func(c *Config) {
		c.Norm, c.FusedQKV, c.KV, c.QKVBias, c.OutBias, c.Rope, c.SoftmaxF32, c.Attn, c.Act, c.MLPBias =
			"layernorm", true, 8, true, true, false, false, "eager", "gelu", true
	}
	for _, tc := range []struct {
		name     string
		change   func(*Config)
		measured int64
	}{
		{"llama sdpa bf16", func(c *Config) {}, 1_057_792},
		{"llama eager bf16", func(c *Config) { c.Attn = "eager" }, 1_324_032},
		{"llama sdpa fp32", func(c *Config) { c.DType = "fp32" }, 2_110_464},
		{"llama sdpa autocast", func(c *Config) { c.DType = "amp_bf16" }, 2_507_776},
		{"gpt2 eager bf16", gpt2, 1_008_640},
	} {
		c := sacBlock("none")
		tc.change(&c)
		c.Compile = "blocks"
		one, _, err := Replay(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		two, _, err := Replay(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		got := two.SavedActivations - one.SavedActivations + two.SavedWeightCopies - one.SavedWeightCopies
		if got != tc.measured {
			t.Errorf("%s: %d B held per block, AOTAutograd saves %d B (%+d)", tc.name, got, tc.measured, got-tc.measured)
		}
	}
}

// TestCompiledLoss: torchtune's compile_loss compiles the chunked loss's
// compute_cross_entropy, cross_entropy(logits.float(), labels), on each
// chunk of logits. compiled.py ("loss", a bf16 chunk [2, 32, 500])
// measures what that graph saves: the bf16 logits (64,000 B), the fp32
// row max and log-sum-exp (256 B each) and the int64 labels (not
// modelled). Eager mode saves the fp32 log-probabilities (128,000 B)
// instead: 63,488 B more per chunk, here two chunks of s=64.
func TestCompiledLoss(t *testing.T) {
	c := sacBlock("none")
	c.Vocab, c.LogitsFP32, c.LossChunks = 500, true, 2
	eager, _, err := Replay(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.Compile = "loss"
	compiled, _, err := Replay(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eager.SavedActivations-compiled.SavedActivations, int64(2*(128_000-64_000-2*256)); got != want {
		t.Errorf("compiling the loss saves %d B less, AOTAutograd %d B less", got, want)
	}
}

// TestCompiledBudget: torch.compile's activation memory budget on sac.py's
// block (compiled.py "budget=B", activation_memory_budget=B, no
// checkpointing, the CPU's SDPA kernel counted compute-intensive as CUDA's
// is), per block: B=0 saves the block's input only (65,536 B); B=0.5
// saves 581,632 B, counted by hand: the input (65,536), the outputs of
// k_proj and v_proj (2 x 16,384), q after RoPE and o_proj's output
// (2 x 65,536), gate_proj's and up_proj's (2 x 176,128). The knapsack
// (capacity 0.5 of the 1,057,792 B the partitioner saves beyond the
// inputs, the attention output counted twice, as its alias and as
// o_proj's input) keeps the six matmuls and lets the attention kernel
// (69,632 B for 8.4 MFLOP at s=64) and the norms' reductions be
// recomputed. Eager attention under autocast (fp32 weights) at B=0.3
// saves what compile saves on its own, 2,774,016 B: the fp32 weights,
// graph inputs the smallest saved set counts, outweigh the bf16 copies
// and activations the partitioner saves, so no budget changes anything.
func TestCompiledBudget(t *testing.T) {
	for _, tc := range []struct {
		budget   float64
		measured int64
		change   func(*Config)
	}{
		{0, 65_536, nil},
		{0.5, 65_536 + 2*16_384 + 2*65_536 + 2*176_128, nil},
		{0.2, 274_432, nil},
		{0.8, 652_288, nil},
		{0.3, 2_774_016, func(c *Config) { c.Attn, c.DType = "eager", "amp_bf16" }},
	} {
		c := sacBlock("budget")
		if tc.change != nil {
			tc.change(&c)
		}
		c.Ckpt.Budget = tc.budget
		c.Compile = "blocks"
		one, _, err := Replay(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		two, _, err := Replay(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		got := two.SavedActivations - one.SavedActivations + two.SavedWeightCopies - one.SavedWeightCopies
		if got != tc.measured {
			t.Errorf("budget %g: %d B held per block, AOTAutograd saves %d B (%+d)", tc.budget, got, tc.measured, got-tc.measured)
		}
	}
}
