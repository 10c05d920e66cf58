package importers

// Axolotl's qat: block (utils/schemas/quantization.py QATConfig,
// utils/quantization.py prepare_model_for_qat and _make_qat_config at
// 067b021c8): activation_dtype (None by default), weight_dtype (int8 by
// default), group_size (32), quantize_embedding (False),
// fake_quant_after_n_steps. With int8 activations and int4 weights
// quantize_(model, QATConfig(IntxFakeQuantizeConfig(int8, per_token,
// asymmetric), Int4WeightFakeQuantizeConfig(group_size, bf16))) swaps every
// nn.Linear, lm_head included: train(qat="int8-int4") (docs/qat.md). Liger's
// fused linear cross-entropy, Cut Cross-Entropy and TRL's fused head read
// lm_head's weight without calling the swapped module, so its fake
// quantizers never run: qat_head=False.

// axolotlQAT reads the qat: block into run (the train() keywords it
// writes); adapter is Axolotl's adapter.
func axolotlQAT(t *tree, adapter string, run *hfRun) error {
	if !t.hasUnder("qat") {
		return nil
	}
	act, err := t.str("qat.activation_dtype", "")
	if err != nil {
		return err
	}
	weight, err := t.str("qat.weight_dtype", "int8")
	if err != nil {
		return err
	}
	group, err := t.integer("qat.group_size", 32, 1, 1<<20)
	if err != nil {
		return err
	}
	t.get("qat.fake_quant_after_n_steps") // the steps after it are the QAT step memsh replays
	if emb, err := t.boolean("qat.quantize_embedding", false); err != nil {
		return err
	} else if emb {
		return t.errorf("qat.quantize_embedding", "drop it: memsh fake-quantizes linears only", "not modelled: the embedding's fake-quantized weight")
	}
	switch {
	case act == "int8" && weight == "int4":
	case weight == "nvfp4" || weight == "mxfp4" || act == "nvfp4" || act == "mxfp4":
		key := "qat.weight_dtype"
		if act == "nvfp4" || act == "mxfp4" {
			key = "qat.activation_dtype"
		}
		return t.errorf(key, "qat: activation_dtype: int8, weight_dtype: int4 is modelled", "not modelled: NVFP4 and MXFP4 fake quantization (torchao's prototype mx_formats)")
	case act == "" && weight == "int8", act == "int8" && weight == "int8", act == "int4" && weight == "int4":
		return t.errorf("qat.weight_dtype", "Axolotl raises the same: activation_dtype: int8, weight_dtype: int4",
			"activation_dtype %s with weight_dtype %s is a combination torchao's QAT does not support", orNone(act), weight)
	default:
		return t.errorf("qat.weight_dtype", "qat: activation_dtype: int8, weight_dtype: int4 is modelled",
			"not modelled: activation_dtype %s with weight_dtype %s", orNone(act), weight)
	}
	if adapter != "" {
		return t.errorf("qat", "a full fine-tune (no adapter), or write the plan in Starlark (train(qat=\"8da4w\", lora=...) is torchtune's QAT-LoRA)",
			"not modelled with adapter %s: Axolotl swaps every linear before PEFT wraps them", adapter)
	}
	run.qat, run.qatGroup = "int8-int4", group
	return nil
}

// orNone is a dtype as the messages say it.
func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}
