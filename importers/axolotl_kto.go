package importers

// axolotlKTO reads Axolotl's rl: kto as TRL's KTOTrainer at the release
// Axolotl pins (trl==1.8.0 at 067b021c8), train(preference = kto(trl =
// "1.8"), docs/kto.md). At 067b021c8 (src/axolotl/core/builders/rl.py,
// train.py setup_reference_model, loaders/model.py _load_adapters):
//
//   - the loss is KTOConfig's default, loss_type "kto" (Axolotl sets
//     desirable_weight and undesirable_weight from kto_desirable_weight
//     and kto_undesirable_weight, the loss's arithmetic alone): the KL
//     forwards run, and KTOTrainer refuses a micro_batch_size of 1;
//   - with an adapter (and no rl_adapter_ref_model) Axolotl hands the
//     trainer the LoRA config alone (config_only), KTOTrainer wraps the
//     model and its reference is the policy with its adapters disabled;
//   - the builder passes no reference model to KTOTrainer (only DPO's
//     gets model_ref), yet setup_reference_model loads one without an
//     adapter or with rl_adapter_ref_model, held by the builder, and
//     KTOTrainer loads its own copy (create_model_from_path, fp32 by
//     default beside the bf16 policy): refused;
//   - precompute_ref_log_probs reaches DPOConfig alone
//     (core/trainers/dpo/__init__.py): it changes nothing here;
//   - a pretrained adapter (lora_model_dir) makes KTOTrainer add a "ref"
//     adapter, a copy of it, as the reference: refused.
func axolotlKTO(t *tree, adapter string) (string, error) {
	const hint = "leave it out, or write the plan in Starlark (train(preference=kto(...)): docs/kto.md)"
	if adapter == "" {
		return "", t.errorf("rl", "add an adapter (adapter: lora; the reference is then the policy with its adapters disabled), or write the plan in Starlark",
			"not modelled: kto without an adapter (Axolotl loads a reference model it hands no KTOTrainer, which loads its own copy in fp32)")
	}
	refModel, err := t.boolean("rl_adapter_ref_model", false)
	if err != nil {
		return "", err
	}
	if refModel {
		return "", t.errorf("rl_adapter_ref_model", hint, "not modelled with rl kto: Axolotl loads a reference model that KTOTrainer never reads (it disables the adapters)")
	}
	if dir, _ := t.get("lora_model_dir"); dir != nil && dir != "" {
		return "", t.errorf("lora_model_dir", hint, `not modelled with rl kto: KTOTrainer copies a pretrained adapter into a "ref" adapter as the reference`)
	}
	rows, err := t.integer("micro_batch_size", 1, 1, 1<<20)
	if err != nil {
		return "", err
	}
	if rows < 2 {
		return "", t.errorf("micro_batch_size", "2 or more", "KTOTrainer refuses a per-device batch of %d: its KL term would be the implied reward", rows)
	}
	return `kto(loss = "kto", reference = "adapters", trl = "1.8")`, nil
}
