package importers

// llamaFactoryKTO reads stage kto's keys (FinetuningArguments,
// src/llamafactory/hparams/finetuning_args.py; run_kto,
// train/kto/workflow.py; CustomKTOTrainer, train/kto/trainer.py, at
// ff6d4d12e) as train(preference=)'s kto() expression, LLaMA-Factory's own
// KTO step (core/kto.go, ktoLossLlamaFactory): the KL forwards always run
// (calculate_KL), on any per_device_train_batch_size (CustomKTOTrainer
// skips TRL's check of it); the reference is the policy with its adapters
// disabled under finetuning_type lora (create_ref_model returns None), a
// copy of the model in a full run with pure_bf16, refused without it (the
// fp32 policy beside a bf16 reference, as for stage dpo); ref_model is
// refused; pref_beta, pref_ftx, kto_chosen_weight and kto_rejected_weight
// weigh the loss alone.
func llamaFactoryKTO(t *tree, kind string, pure bool) (string, error) {
	if err := llamaFactoryRefModel(t); err != nil {
		return "", err
	}
	ref := "adapters"
	switch {
	case kind == "lora":
	case !pure:
		return "", t.errorf("finetuning_type", "pure_bf16: true (the policy and its reference both in bf16), or finetuning_type lora",
			"a full KTO run trains fp32 weights beside a reference copy in the compute dtype: not modelled (memsh's copy is in the policy's dtype)")
	default:
		ref = "model"
	}
	for _, k := range []string{"pref_beta", "pref_ftx", "kto_chosen_weight", "kto_rejected_weight"} {
		t.get(k) // the loss's weights
	}
	return call("kto", kw("reference", str(ref)), kw("trainer", str("llamafactory"))), nil
}
