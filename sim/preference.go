package sim

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// preferenceNote says what a DPO plan's step holds beyond a language
// model's (core/preference.go, core/dpo.go): its rows and its reference.
func preferenceNote(plan *core.Plan, prog *core.Program) string {
	pr := plan.Preference
	if pr == nil {
		return ""
	}
	rows := fmt.Sprintf("dpo (%s): %s of %s, each a chosen and a rejected row of %d tokens", trainerName(pr),
		units.Count(plan.Batch*pr.Rows(), "row"), units.Count(plan.Batch, "pair"), plan.Seq)
	if pr.KTO() {
		rows = fmt.Sprintf("kto (%s, loss %s): %s of %d tokens, each desirable or undesirable", trainerName(pr), pr.Loss,
			units.Count(plan.Batch, "row"), plan.Seq)
		switch {
		case pr.KL() && pr.Trainer == core.TrainerLlamaFactory:
			rows += "; a KL forward under no_grad over the mismatched pairs (kl_input_ids) after the policy's and after the reference's, each forward's fp32 logits copied by row label"
		case pr.KL():
			rows += "; a KL forward under no_grad over the mismatched pairs (KL_input_ids) before the policy's and before the reference's"
		}
	}
	switch pr.Reference {
	case core.RefNone:
		return rows + "; a loss without a reference (ORPO, SimPO): no reference forward"
	case core.RefPrecomputed:
		return rows + "; the reference log-probabilities come with the batch (precompute_ref_log_probs): no reference forward"
	case core.RefAdapters:
		return rows + "; the reference is the policy with its LoRA adapters disabled, a forward under no_grad after the policy's: no second copy of the weights"
	}
	var bytes int64
	for _, p := range prog.Params {
		if strings.HasPrefix(p.Name, "ref_model.") && p.TiedTo < 0 {
			dt := p.DType
			if dt == units.InvalidDType {
				dt = plan.Precision.Params
			}
			bytes += dt.Bytes(p.Numel)
		}
	}
	return fmt.Sprintf("%s; the reference model is a second copy of the weights (%s, in params, in no optimizer), its forward under no_grad after the policy's",
		rows, units.FormatBytes(bytes))
}

// trainerName names the trainer of pr, and for TRL the releases its
// Preference.TRL spelling stands for.
func trainerName(pr *core.Preference) string {
	switch {
	case pr.Trainer == core.TrainerTorchtune:
		return "torchtune's recipes"
	case pr.Trainer == core.TrainerLlamaFactory && pr.KTO():
		return "LLaMA-Factory's stage kto"
	case pr.Trainer == core.TrainerLlamaFactory:
		return "LLaMA-Factory's stage dpo"
	case pr.TRL == core.TRLLogits && pr.KTO():
		return "TRL 1.8.0"
	case pr.TRL == core.TRLLogits:
		return "TRL 1.8 to 1.13"
	}
	return "TRL 1.15 and later"
}
