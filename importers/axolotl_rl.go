package importers

import "fmt"

// axolotlRL reads Axolotl's rl as TRL's DPOTrainer at the release Axolotl
// pins (trl==1.8.0 at 067b021c8: pyproject.toml), train(preference =
// dpo(trl = "1.8"), docs/dpo.md): rl dpo, or ipo (DPO with loss_type
// ["ipo"]: the same tensors); rl kto as TRL's KTOTrainer (axolotlKTO),
// rl grpo and gdpo as its GRPOTrainer (axolotlGRPO; seq is --seq).
// The reference (train.py
// setup_reference_model): with an adapter and no rl_adapter_ref_model,
// none is loaded and DPOTrainer disables the adapters; otherwise Axolotl
// loads the model again and passes it as ref_model, which TRL 1.8 keeps
// on the GPU whether or not precompute_ref_log_probs skips its forward.
// It returns the dpo(), kto() or grpo() expression, "" without rl.
func axolotlRL(t *tree, adapter string, cce bool, seq int64) (string, error) {
	rl, err := t.str("rl", "")
	if err != nil || rl == "" {
		return "", err
	}
	const hint = "leave it out, or write the plan in Starlark (train(preference=dpo(...)), kto(...) or grpo(...): docs/dpo.md, docs/kto.md, docs/grpo.md)"
	switch rl {
	case "dpo", "ipo", "kto":
	case "grpo", "gdpo":
		if err := t.refuseOn(hint, "rl grpo", []keyWhat{{"sample_packing", "packed rows (GRPOTrainer pads each prompt and completion)"}}); err != nil {
			return "", err
		}
		if cce {
			return "", t.errorf("plugins", hint, "not modelled with rl grpo: Cut Cross-Entropy (GRPOTrainer calls the model without labels for its logits)")
		}
		return axolotlGRPO(t, adapter, seq)
	default:
		return "", t.errorf("rl", hint, "not modelled: %s (memsh replays DPOTrainer, rl dpo or ipo, KTOTrainer, rl kto, and GRPOTrainer, rl grpo or gdpo)", rl)
	}
	if err := t.refuseOn(hint, "rl", []keyWhat{
		{"dpo_use_liger_kernel", "Liger's chunked DPO loss"},
		{"dpo_padding_free", "pairs packed without padding"},
		{"dpo_use_weighting", "WPO's weights, a logsumexp over the logits"},
		{"sample_packing", "packed rows (TRL's collator pads each pair's rows)"},
	}); err != nil {
		return "", err
	}
	if cce {
		return "", t.errorf("plugins", hint, "not modelled with rl: Cut Cross-Entropy (DPOTrainer and KTOTrainer call the model without labels for its logits)")
	}
	if rl == "kto" {
		return axolotlKTO(t, adapter)
	}
	refModel, err := t.boolean("rl_adapter_ref_model", false)
	if err != nil {
		return "", err
	}
	precompute, err := t.boolean("precompute_ref_log_probs", false)
	if err != nil {
		return "", err
	}
	ref := "model"
	switch {
	case adapter != "" && !refModel && precompute:
		ref = "precomputed"
	case adapter != "" && !refModel:
		ref = "adapters"
	case precompute:
		return "", t.errorf("precompute_ref_log_probs", "leave it out (memsh then replays the reference forward), or write the plan in Starlark",
			"not modelled: Axolotl loads a reference copy of the model, which DPOTrainer keeps on the GPU though the precomputed log-probabilities skip its forward")
	}
	return fmt.Sprintf("dpo(reference = %s, trl = %s)", str(ref), str("1.8")), nil
}
