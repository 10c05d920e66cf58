package importers

// llamaFactoryDPO reads stage dpo's keys (FinetuningArguments' RLHF
// arguments, src/llamafactory/hparams/finetuning_args.py; run_dpo,
// train/dpo/workflow.py; create_ref_model, train/trainer_utils.py) as
// train(preference=)'s dpo() expression, LLaMA-Factory's own DPO step
// (core/dpo_logits.go):
//
//   - pref_loss sigmoid (the default), hinge, ipo and kto_pair score the
//     reference's log-probabilities (use_ref_model); orpo and simpo need
//     none (reference "none");
//   - the reference of a LoRA run is the policy with its adapters disabled
//     (create_ref_model returns None and CustomDPOTrainer calls
//     disable_adapter()); of a full run, a second copy of the model, loaded
//     frozen in the compute dtype, beside fp32 trainable weights unless
//     pure_bf16: memsh's copy is in the policy's dtype, so a full run
//     without pure_bf16 is refused;
//   - ref_model (a reference from another checkpoint) is refused;
//   - pref_beta, pref_ftx (the chosen rows' SFT term: [batch] tensors),
//     pref_bco_weight, dpo_label_smoothing and simpo_gamma weigh the loss
//     alone; ld_alpha (LD-DPO's masks, [rows, seq] tensors) is listed as
//     not modelled.
func llamaFactoryDPO(t *tree, kind string, pure bool) (string, error) {
	loss, err := t.str("pref_loss", "sigmoid")
	if err != nil {
		return "", err
	}
	if err := llamaFactoryRefModel(t); err != nil {
		return "", err
	}
	var ref string
	switch {
	case loss == "orpo" || loss == "simpo": // use_ref_model is False
		ref = "none"
	case loss != "sigmoid" && loss != "hinge" && loss != "ipo" && loss != "kto_pair":
		return "", t.errorf("pref_loss", "sigmoid, hinge, ipo, kto_pair, orpo or simpo", "unknown loss %s", quoteKey(loss))
	case kind == "lora":
		ref = "adapters"
	case !pure:
		return "", t.errorf("finetuning_type", "pure_bf16: true (the policy and its reference both in bf16), or finetuning_type lora",
			"a full DPO run trains fp32 weights beside a reference copy in the compute dtype: not modelled (memsh's copy is in the policy's dtype)")
	default:
		ref = "model"
	}
	for _, k := range []string{"pref_beta", "pref_ftx", "pref_bco_weight", "dpo_label_smoothing", "simpo_gamma"} {
		t.get(k) // the loss's weights
	}
	t.notModelledIf("ld_alpha", "LD-DPO's length masks ([rows, seq] tensors beside the log-probabilities)")
	return call("dpo", kw("reference", str(ref)), kw("trainer", str("llamafactory"))), nil
}

// llamaFactoryRefModel refuses a reference from another checkpoint
// (ref_model and its keys): memsh's reference is the policy with its
// adapters disabled or a copy of the model.
func llamaFactoryRefModel(t *tree) error {
	if v, _ := t.get("ref_model"); v != nil {
		return t.errorf("ref_model", "leave it out: the reference is then the policy with its adapters disabled (lora) or a copy of the model (full)",
			"a reference model from another checkpoint is not modelled")
	}
	for _, k := range []string{"ref_model_adapters", "ref_model_quantization_bit"} {
		if v, _ := t.get(k); v != nil {
			return t.errorf(k, "leave it out", "applies to ref_model, which memsh does not model")
		}
	}
	return nil
}
