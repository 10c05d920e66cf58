package importers

// axolotlMoEQuant reads quantize_moe_experts (schemas/config.py
// check_quantize_moe_experts and monkeypatch/moe_quant.py at axolotl
// 067b021c8): with qlora's 4-bit base the 3-D expert weights are quantized
// to nf4 as transformers loads them and dequantized on access,
// train(quant_experts = True) (sim/core/quant_experts.go). Axolotl refuses
// it beside lora_target_linear and without an adapter and a quantized base;
// its 8-bit parametrization (load_in_8bit) is not modelled. LoRA on the
// experts (lora_target_parameters, or module names PEFT converts to them)
// merges into the dequantized weight (patch_peft_target_parameters_matching). The experts'
// absmax is double-quantized unless bnb_4bit_use_double_quant (a top-level
// key, not bnb_config_kwargs') is false: memsh stores them in the linears'
// scheme, so a mismatch is listed as not modelled.
func axolotlMoEQuant(t *tree, adapter string) (bool, error) {
	on, err := t.boolean("quantize_moe_experts", false)
	if err != nil || !on {
		return false, err
	}
	const key = "quantize_moe_experts"
	if linear, _ := t.boolean("lora_target_linear", false); linear {
		return false, t.errorf("lora_target_linear", "Axolotl refuses it too: name the modules (lora_target_modules), or drop quantize_moe_experts",
			"is not compatible with quantize_moe_experts")
	}
	if adapter != "lora" && adapter != "qlora" {
		return false, t.errorf(key, "Axolotl refuses it too: adapter lora or qlora with load_in_4bit", "requires an adapter and a quantized base")
	}
	if in8, _ := t.boolean("load_in_8bit", false); in8 {
		return false, t.errorf(key, "load_in_4bit with adapter qlora, or drop quantize_moe_experts",
			"not modelled with load_in_8bit: Axolotl's 8-bit parametrization of the experts (int8_vectorwise_dequant on access)")
	}
	linearDQ, _ := t.boolean("bnb_config_kwargs.bnb_4bit_use_double_quant", true)
	expertsDQ, err := t.boolean("bnb_4bit_use_double_quant", true)
	if err != nil {
		return false, err
	}
	if linearDQ != expertsDQ {
		t.notModelled = append(t.notModelled, "bnb_4bit_use_double_quant: the experts' absmax double-quantized or not apart from the linears' (memsh stores both in the linears' scheme)")
	}
	return true, nil
}
