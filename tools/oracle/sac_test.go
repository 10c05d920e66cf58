package oracle

import "testing"

// sacBlock is sac.py's block: a Llama-3-shaped block, small (h=256, 8
// heads of 32, 2 kv heads, SwiGLU 688, RoPE, SDPA, RMSNorm, no biases), in
// bf16, b=2, s=64.
func sacBlock(mode string) Config {
	return Config{H: 256, A: 8, KV: 2, FFN: 688, S: 64, B: 2, Vocab: 50, Norm: "rmsnorm", Rope: true,
		SoftmaxF32: true, Attn: "sdpa", Act: "swiglu", FinalNorm: true, LossChunks: 1, DType: "bf16",
		Ckpt: Ckpt{Mode: mode}}
}

// TestSelectiveOpPolicy replays torchtitan's per-op selective
// checkpointing against what PyTorch keeps. Measured with
// tools/oracle/sac.py (torch 2.15.0+cu132 on the CPU, one thread: the
// storages alive after the forward, less parameters, buffers, the input
// and the output; depth 2 less depth 1), per block:
//
//	none 1,496,064 B; full 65,536 B (the block's input); op 458,752 B.
//
// Counted by hand for op (T = b*s = 128 tokens, bf16): the input (T*256*2
// = 65,536) and the kept outputs of the 1st, 3rd, 5th and 7th mm, q_proj
// (65,536), v_proj (T*64*2 = 16,384), gate_proj (T*688*2 = 176,128) and
// down_proj (65,536), and of the attention kernel, its output (65,536)
// and fp32 logsumexp (b*8*s*4 = 4,096): 458,752. k_proj, o_proj and
// up_proj (the 2nd, 4th and 6th mm) are recomputed.
func TestSelectiveOpPolicy(t *testing.T) {
	const tokens = 2 * 64
	byHand := int64(tokens*256*2 + tokens*256*2 + tokens*64*2 + tokens*688*2 + tokens*256*2 + tokens*256*2 + 2*8*64*4)
	for _, tc := range []struct {
		mode     string
		measured int64
	}{
		{"none", 1_496_064},
		{"full", 65_536},
		{"op", 458_752},
	} {
		c := sacBlock(tc.mode)
		one, _, err := Replay(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		two, _, err := Replay(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := two.SavedActivations - one.SavedActivations; got != tc.measured {
			t.Errorf("%s: %d B held per block, PyTorch keeps %d B", tc.mode, got, tc.measured)
		}
		if tc.mode == "op" && tc.measured != byHand {
			t.Errorf("op: measured %d B, counted by hand %d B", tc.measured, byHand)
		}
	}
}

// TestLayerPolicyCountsFromOne: torchtitan's and torchtune's
// selective_ac_option=k checkpoints the k-th, 2k-th, ... block
// (checkpoint_wrapper._count % k == 0 with the count starting at one), and
// so do checkpoint(every=k) and its spelling checkpoint(policy="layer",
// every=k). On two of sac.py's blocks with k=2 the first block runs
// without checkpointing and the second is checkpointed: the step holds
// what one unchecked block holds, plus the second block's input (b*s*h
// bf16 = 65,536 B, counted by hand), which nothing saves otherwise (the
// final RMSNorm keeps its own fp32 copy).
func TestLayerPolicyCountsFromOne(t *testing.T) {
	none := sacBlock("none")
	one, _, err := Replay(none, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"layer", "every"} {
		layer := sacBlock(mode)
		layer.Ckpt.Every = 2
		two, _, err := Replay(layer, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := two.SavedActivations-one.SavedActivations, int64(2*64*256*2); got != want {
			t.Errorf("%s (every=2) on two blocks holds %d B more than one unchecked block, want %d", mode, got, want)
		}
	}
}

// TestCompiledBlock replays torch.compile's partition of sac.py's block
// against what AOTAutograd saves. Measured with tools/oracle/compiled.py
// (torch 2.15.0+cu132 on the CPU: Inductor's decompositions and
// min_cut_rematerialization_partition(compiler="inductor"); the forward
// graph's outputs past the block's, storages counted once), per block:
//
//	compile 1,057,792 B; compile with torchtitan's op policy 393,216 B.
//
// Counted by hand for compile (T = 128 tokens, bf16): the block's input
// (65,536), the two norms' outputs that feed matmuls (2 x 65,536) and
// their fp32 rsqrt (2 x 512), q after RoPE and k and v expanded to all
// heads (3 x 65,536), the attention output (65,536, also o_proj's input)
// and logsumexp (4,096), o_proj's output (65,536: the residual sum is
// recomputed from it), gate_proj's and up_proj's outputs and their
// product (3 x 176,128). Eager mode keeps 1,496,064 B: the fp32 copies in
// the norms (2 x 131,072), the normalized bf16 tensors before the weight
// (2 x 65,536) and silu's output (176,128), which compile recomputes.
// With the op policy, compile drops down_proj's kept output (65,536) from
// eager's 458,752 B: its backward never reads it.
func TestCompiledBlock(t *testing.T) {
	byHand := int64(65_536 + 2*65_536 + 2*512 + 3*65_536 + 65_536 + 4_096 + 65_536 + 3*176_128)
	for _, tc := range []struct {
		mode     string
		measured int64
	}{
		{"none", 1_057_792},
		{"op", 393_216},
	} {
		c := sacBlock(tc.mode)
		c.Compile = "blocks"
		one, _, err := Replay(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		two, _, err := Replay(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := two.SavedActivations - one.SavedActivations; got != tc.measured {
			t.Errorf("compile, checkpoint %s: %d B held per block, AOTAutograd saves %d B", tc.mode, got, tc.measured)
		}
	}
	if byHand != 1_057_792 {
		t.Errorf("counted by hand %d B", byHand)
	}
}
