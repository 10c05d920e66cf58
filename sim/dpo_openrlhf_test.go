package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestDPOOpenRLHF counts OpenRLHF's DPO log-probabilities
// (sim/core/dpo_openrlhf.go) by hand on dpoPlan's pair (2 rows of 1,024
// tokens, V = 32,000, bf16, its reference a copy): the logits B =
// 131,072,000 bytes, their fp32 copy F = 262,144,000; flash-attn's
// cross-entropy over the 2,048 positions writes each one's loss, z-loss
// and log-sum-exp (fp32 [2,048], P = 8,192 each), the z-losses dropped at
// once; -losses is another P, the losses then free; the bool mask 2,048;
// each masked product fp32 [2, 1,023], 8,184.
//
//   - Forward: the cast makes F and frees B (lm_head saves its input, not
//     its output); the policy's cross-entropy saves F and the log-sum-exp;
//     no [rows, seq, V] log-probabilities are ever made (LLaMA-Factory's
//     log_softmax makes two, TestDPOTrainers). The reference's copy frees
//     its F as soon as its cross-entropy (under no_grad, saving nothing)
//     has read it, with its log-sum-exp and z-losses.
//   - Backward: the cross-entropy writes the logits' gradient F, then its
//     saved log-sum-exp and logits go; the cast's backward makes B and
//     frees F.
func TestDPOOpenRLHF(t *testing.T) {
	const b, f, pos = 131_072_000, 262_144_000, 8_192
	p := dpoPlan(core.RefModel, "")
	p.Preference.Trainer = core.TrainerOpenRLHF
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, r.Trace, []opEventCase{
		{"to_fp32", replay.PhaseForward, []int64{f, -b}},
		{"log_probs.flash_cross_entropy", replay.PhaseForward, []int64{pos, pos, pos, -pos}},
		{"log_probs.log_probs", replay.PhaseForward, []int64{pos, -pos}},
		{"ref_model.to_fp32", replay.PhaseForward, []int64{f, -b}},
		{"ref_model.log_probs.flash_cross_entropy", replay.PhaseForward, []int64{pos, pos, pos, -f, -pos, -pos}},
		{"log_probs.flash_cross_entropy", replay.PhaseBackward, []int64{f, -pos, -f, -pos}},
		{"to_fp32", replay.PhaseBackward, []int64{b, -f}},
	})
	// under LoRA the reference is still a second model, loaded without
	// adapters (train_dpo.py's ref_model Actor has no lora_rank)
	lp := dpoPlan(core.RefAdapters, "")
	lp.Preference.Trainer, lp.Preference.TRL, lp.Preference.Reference = core.TrainerOpenRLHF, "", core.RefModel
	prog, err := lp.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var refs, adapters int
	for _, p := range prog.Params {
		if strings.HasPrefix(p.Name, core.RefCopy+".") {
			refs++
			if strings.Contains(p.Name, "lora_") {
				adapters++
			}
		}
	}
	if refs == 0 || adapters != 0 {
		t.Errorf("the reference copy has %d parameters, %d of them LoRA adapters; want a copy without adapters", refs, adapters)
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "dpo (OpenRLHF's train_dpo): 2 rows of 1 pair") }) {
		t.Errorf("notes %q, want the DPO note naming OpenRLHF's train_dpo", r.Notes)
	}
}
