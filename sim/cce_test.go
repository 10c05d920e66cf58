package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestCutCrossEntropy counts Cut Cross-Entropy (sim/core/cce.go; Axolotl's
// fork of apple/ml-cross-entropy at 5f0c7a7) by hand on the small Llama of
// chunkedLossPlan: hidden D = 512, V = 32,000, 2 rows of 1,024 tokens in
// bf16, every label valid, so n = 2 x 1,023 = 2,046 targets:
//
//   - _build_flat_valids: the indices, int64 [n] 16,368 (saved), beside
//     the mask (bool [n] 2,046), nonzero's int64 [n, 2] 32,736 and its
//     int32 copy 16,368, dropped together;
//   - the forward kernel: lse fp32 [n] 8,184 (saved), its locks uint32
//     [16] 64, logit_avg fp32 [V] 128,000 (saved), neg_dot fp32 [n] 8,184
//     and the loss (4 bytes); the locks and neg_dot go with the call;
//   - the backward: sort_logit_avg's fp32 values 128,000 and int64
//     indices 256,000 and its int32 ordering 128,000, the locks of de
//     (int32 [16, 8] 512) and dc (int32 [250, 8] 8,000); de =
//     zeros_like(e), bf16 [2,048, 512] 2,097,152, and dc =
//     zeros_like(lm_head.weight), bf16 [32,000, 512] 32,768,000, as the
//     gradients; then the loss, the saved head input (the final norm's
//     output, 2,097,152), the indices, lse and logit_avg go. memsh holds
//     the sort's temporaries beside the gradients, where PyTorch drops
//     them first (12 bytes a vocabulary entry above its peak there).
//
// No logits, forward or backward.
func TestCutCrossEntropy(t *testing.T) {
	r, err := Evaluate(chunkedLossPlan(core.CCELoss, 1), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, r.Trace, []opEventCase{
		{"loss.valids", replay.PhaseForward, []int64{16_368, 2_046, 32_736, 16_368, -2_046, -32_736, -16_368}},
		{"loss.linear_cross_entropy", replay.PhaseForward, []int64{8_184, 64, 128_000, 8_184, 4, -64, -8_184}},
		{"loss.linear_cross_entropy", replay.PhaseBackward, []int64{128_000, 256_000, 128_000, 512, 8_000, 2_097_152, 32_768_000,
			-128_000, -256_000, -128_000, -512, -8_000, -4, -2_097_152, -16_368, -8_184, -128_000}},
	})
}
