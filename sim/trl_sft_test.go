package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestTRLSFTHead counts TRL's fused LM head as SFTTrainer runs it
// (loss_chunks="trl", sim/core/trl_sft.go; trl 1.16.0) by hand on the
// small Llama of chunkedLossPlan: 2 rows of 1,024 tokens, n = 2,046 scored
// positions, hidden 512, V = 32,000, bf16, a full fine-tune. Beside what
// TestDPOFusedHead counts, SFTTrainer asks for the entropy and the argmax
// hits (outputs=("log_probs", "entropy", "is_top1")):
//
//   - the Function's outputs: log_z, log_probs and entropy, fp32 [n]
//     8,184 each, is_top1 bool [n] 2,046; its temporaries: the seven
//     running statistics, log(sum_exp) and x_sum_exp / sum_exp (fp32 [n]
//     8,184 each), the two comparisons before is_top1's & (bool [n] 2,046
//     each) and mm_buf 130,944,000; it saves the entropy in log_z's
//     second slot;
//   - each output scattered back to [2, 1,023]: log_probs and entropy
//     fp32 8,184 (a zeros tensor of the same size each, dropped), is_top1
//     bool 2,046;
//   - the loss: -log_probs, fp32 [2, 1,023] 8,184; its sum over the
//     tokens, 4 bytes, where the output's entropy, argmax hits and
//     -log_probs go; the backward hands the gradient on as an expanded view
//     (nothing), negates it (8,184), and the Function's backward gets none
//     for the entropy: its own buffers as TestDPOFusedHead's, then the
//     saved hidden copy, targets, log_z and entropy go.
func TestTRLSFTHead(t *testing.T) {
	r, err := Evaluate(chunkedLossPlan(core.TRLHead, 1), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const (
		n32, n8, hs, tile = 8_184, 2_046, 2_095_104, 130_944_000
	)
	checkOpEvents(t, r.Trace, []opEventCase{
		{"fused_lm_head.chunked_logprob", replay.PhaseForward, []int64{n32, n32, n32, n8, n32, n32, n32, n32, n32, n32, n32, n32, n32, n8, n8, tile,
			-n32, -n32, -n32, -n32, -n32, -n32, -n32, -n32, -n32, -n8, -n8, -tile}},
		{"fused_lm_head.log_probs", replay.PhaseForward, []int64{n32, n32, -n32, -n32}},
		{"fused_lm_head.entropy_scattered", replay.PhaseForward, []int64{n32, n32, -n32}},
		{"fused_lm_head.is_top1_scattered", replay.PhaseForward, []int64{n8, n8, -n8, -n8}},
		{"loss.per_token_loss", replay.PhaseForward, []int64{n32, -n32}},
		{"loss.loss", replay.PhaseForward, []int64{4, -n32, -n32, -n8}},
		{"loss.per_token_loss", replay.PhaseBackward, []int64{n32}},
		{"fused_lm_head.entropy_scattered", replay.PhaseBackward, nil},
		{"fused_lm_head.chunked_logprob", replay.PhaseBackward, []int64{4_190_208, 65_536_000, tile, hs, 32_768_000,
			-4_190_208, -65_536_000, -tile, -n32, -hs, -16_368, -n32, -n32}},
	})
}
