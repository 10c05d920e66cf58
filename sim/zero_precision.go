package sim

import "github.com/memsh/memsh/sim/core"

// zeroPrecisionNote says what a pure named policy under DeepSpeed's ZeRO
// leaves out: DeepSpeed has no mode without a master copy of its partition
// (core/zero_precision.go), so precision="bf16", "fp16" or "fp32" with zero=
// is memsh's pure policy, not a DeepSpeed run. The note names the DeepSpeed
// runs beside it. Empty for other plans, a step that does not train, a
// quantized one (QLoRA), or ZeRO-Offload's, whose host state is DeepSpeed's
// fp32 master and moments whatever the policy (Precision.ZeroHostStates).
func zeroPrecisionNote(plan *core.Plan) string {
	prec := plan.Precision
	if plan.Parallel.Norm().Zero == 0 || plan.Phase == core.Eval || plan.Quant != "" || plan.Offload != nil && plan.Offload.Optimizer != "" {
		return ""
	}
	const lead = "zero= with precision=\""
	switch prec.Name {
	case "bf16":
		return lead + "bf16\": no master copy, bf16 moments, which DeepSpeed has no mode for: its bf16 mode is precision=\"bf16-mixed\" (fp32 master and moments), " +
			"its low-precision one precision(\"bf16-mixed\", master=\"bf16\", optimizer_states=\"bf16\") (bf16_master_weights_and_grads with bf16_optimizer_states: a bf16 copy of the partition more than this plan)"
	case "fp16":
		return lead + "fp16\": no master copy, fp16 moments, which DeepSpeed has no mode for: its fp16 mode is precision=\"fp16-mixed\" (fp32 master and moments)"
	case "fp32":
		return lead + "fp32\": DeepSpeed's ZeRO steps its own copy of the fp32 partition, which this pure policy leaves out: precision(\"fp32\", master=\"fp32\") counts it"
	}
	return ""
}
