package importers

// axolotlAdapter is adapter: "" (a full fine-tune), lora or qlora
// (schemas/peft.py l.180-220 at axolotl 067b021c8), with load_in_4bit and
// load_in_8bit as Axolotl's validators and loader pair them.
func axolotlAdapter(t *tree) (string, error) {
	adapter, err := t.str("adapter", "")
	if err != nil {
		return "", err
	}
	in4, err := t.boolean("load_in_4bit", false)
	if err != nil {
		return "", err
	}
	in8, err := t.boolean("load_in_8bit", false)
	if err != nil {
		return "", err
	}
	switch {
	case adapter != "" && adapter != "lora" && adapter != "qlora":
		return "", t.errorf("adapter", "lora or qlora, or leave it out for a full fine-tune", "adapter %s is not modelled", quoteKey(adapter))
	case adapter == "" && (in4 || in8):
		key := "load_in_4bit"
		if in8 {
			key = "load_in_8bit"
		}
		return "", t.errorf(key, "Axolotl refuses it too: set adapter: qlora (4-bit) or lora (8-bit), or turn it off for a full fine-tune",
			"a quantized model trains only adapters (no adapter set)")
	case adapter == "qlora" && in8:
		return "", t.errorf("load_in_8bit", "Axolotl refuses it too: qlora loads in 4 bits (load_in_4bit: true)", "qlora cannot load in 8 bits")
	case adapter == "qlora" && !in4:
		return "", t.errorf("adapter", "Axolotl refuses it too: set load_in_4bit: true", "qlora requires load_in_4bit")
	case adapter == "lora" && in4:
		// bitsandbytes' 4-bit config is built for qlora only (loaders/model.py
		// l.712-743): the weights load unquantized, then
		// prepare_model_for_kbit_training upcasts them all to fp32
		return "", t.errorf("load_in_4bit", "adapter: qlora for a 4-bit base, or load_in_4bit: false",
			"with adapter lora Axolotl loads the weights unquantized, then prepare_model_for_kbit_training upcasts every one to fp32: not modelled")
	}
	if adapter != "" {
		t.derive("use_peft", true, "adapter")
	}
	return adapter, nil
}

// axolotlQuant is qlora's bitsandbytes config (loaders/model.py
// l.712-738): nf4 with double quantization, its storage dtype bf16 (the
// same bytes), bnb_config_kwargs merged over it. kbitPrepared says
// prepare_model_for_kbit_training runs (not under FSDP or DeepSpeed,
// which cast the model whole).
func axolotlQuant(t *tree, adapter string, model axolotlModel, kbitPrepared bool) error {
	if adapter != "qlora" {
		return nil
	}
	double, err := t.boolean("bnb_config_kwargs.bnb_4bit_use_double_quant", true)
	if err != nil {
		return err
	}
	kind, err := t.str("bnb_config_kwargs.bnb_4bit_quant_type", "nf4")
	if err != nil {
		return err
	}
	if kind != "nf4" {
		return t.errorf("bnb_config_kwargs.bnb_4bit_quant_type", "memsh models nf4", "quant type %s is not modelled", quoteKey(kind))
	}
	t.derive("use_bnb_nested_quant", double, "adapter")
	if kbitPrepared && !model.plain {
		// prepare_model_for_kbit_training upcasts what bitsandbytes leaves;
		// Axolotl casts back only the modules named *norm*, embed_tokens
		// and lm_head (model.py l.1025-1046)
		t.notModelled = append(t.notModelled, "adapter: prepare_model_for_kbit_training upcasts to fp32 every weight bitsandbytes does not quantize, "+
			"and Axolotl casts back only the norms, embed_tokens and lm_head: any other ("+model.kind+"'s biases, routers, convolutions, if it has them) stays fp32, which memsh keeps in the model's dtype")
	}
	return nil
}

// axolotlLoRA is the LoraConfig _build_peft_lora_config writes
// (loaders/adapter.py l.167-202): lora_r and lora_alpha as given (no
// default), lora_dropout 0.0 (schemas/peft.py l.233-238), the targets
// lora_target_modules plus, with lora_target_linear, every linear layer
// but the head (find_all_linear_names, l.54-71).
func axolotlLoRA(t *tree, adapter string, fsdp1MultiGPU bool) error {
	if adapter == "" {
		return nil
	}
	for _, k := range []string{"lora_r", "lora_alpha"} {
		if !t.has(k) {
			return &Error{File: t.file, Key: k, Msg: "missing: Axolotl hands PEFT's LoraConfig None",
				Hint: "say the adapters' rank and scale: lora_r: 16, lora_alpha: 32"}
		}
	}
	rank, err := t.integer("lora_r", 0, 1, 1<<16)
	if err != nil {
		return err
	}
	alpha, err := t.integer("lora_alpha", 0, 1, 1<<20)
	if err != nil {
		return err
	}
	dropout, err := t.probability("lora_dropout", 0)
	if err != nil {
		return err
	}
	linear, err := t.boolean("lora_target_linear", false)
	if err != nil {
		return err
	}
	var mods []any
	if linear {
		mods = append(mods, "all-linear")
	}
	v, _ := t.get("lora_target_modules")
	var names []any
	switch x := v.(type) {
	case nil:
	case string:
		// loaders/adapter.py l.171-182: with lora_target_linear the string
		// joins the list of linear names, a name; alone it is PEFT's
		// target_modules string, a regular expression over module paths
		// (lora(target_pattern=)).
		if !linear && x != "all-linear" {
			t.derive("lora_target_modules", x, "lora_target_modules")
			return axolotlLoRADerive(t, rank, alpha, dropout, adapter, fsdp1MultiGPU)
		}
		names = []any{x}
	case []any:
		names = x
	default:
		return t.errorf("lora_target_modules", "a list of module names", "want a list of names, got %s", describe(v))
	}
	for _, n := range names {
		s, ok := n.(string)
		if !ok || s == "" {
			return t.errorf("lora_target_modules", "a list of module names (q_proj, v_proj, ...)", "want a module name, got %s", describe(n))
		}
		if _, role := hfLoRA[s]; !linear || s == "lm_head" || !role { // lora_target_linear finds every other linear; a name it may not reach stays
			mods = append(mods, s)
		}
	}
	// lora_target_parameters: PEFT's target_parameters (loaders/adapter.py
	// l.172, l.191), parameters wrapped by name as its ParamWrapper wraps
	// an MoE's 3-D experts (lora(target_parameters=)).
	params, err := t.strs("lora_target_parameters")
	if err != nil {
		return err
	}
	if len(params) > 0 {
		list := make([]any, len(params))
		for i, p := range params {
			list[i] = p
		}
		t.derive("lora_target_parameters", list, "lora_target_parameters")
	}
	if len(mods) == 0 && len(params) == 0 {
		return t.errorf("adapter", "say which layers: lora_target_linear: true, or lora_target_modules: [q_proj, v_proj]",
			"no LoRA targets (Axolotl hands PEFT an empty target_modules, which it refuses)")
	}
	t.derive("lora_target_modules", mods, "lora_target_modules")
	return axolotlLoRADerive(t, rank, alpha, dropout, adapter, fsdp1MultiGPU)
}

// axolotlLoRADerive hands the Trainer's reading the adapter's rank,
// alpha and dropout, and notes what of Axolotl's LoRA keys memsh leaves.
func axolotlLoRADerive(t *tree, rank, alpha int64, dropout float64, adapter string, fsdp1MultiGPU bool) error {
	t.derive("lora_r", rank, "lora_r")
	t.derive("lora_alpha", alpha, "lora_alpha")
	t.derive("lora_dropout", dropout, "lora_dropout")
	t.notModelledIf("peft_use_dora", "DoRA's magnitude vectors and the weight norm it computes")
	t.notModelledIf("peft_use_rslora", "rank-stabilised scaling (the same tensors)")
	t.notModelledIf("lora_model_dir", "the saved adapter's adapter_config.json sets its rank and targets, not lora_r and lora_target_*")
	axolotlKernels(t, adapter, fsdp1MultiGPU)
	return nil
}

// axolotlKernels are Axolotl's fused LoRA kernels, which its validator
// turns on for lora and qlora when none of their keys is set, except
// 8-bit LoRA, trust_remote_code and FSDP1 over several GPUs
// (check_auto_enable_lora_kernels, schemas/config.py l.1899-1997).
func axolotlKernels(t *tree, adapter string, fsdp1MultiGPU bool) {
	keys := []string{"lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel", "lora_embedding_kernel"}
	auto := (adapter == "qlora" || !t.leaves["load_in_8bit"].truthy()) && !fsdp1MultiGPU
	var on []string
	for _, k := range keys {
		if t.has(k) {
			auto = false
		}
		if t.leaves[k].truthy() {
			on = append(on, k)
		}
		t.get(k)
	}
	if t.leaves["trust_remote_code"].truthy() {
		auto = false
	}
	why := "Axolotl's fused LoRA kernels (LoRA_MLP, LoRA_QKV, LoRA_O: custom autograd functions) save other tensors for backward than PEFT's LoRA layers, which memsh replays"
	switch {
	case auto:
		t.notModelled = append(t.notModelled, "lora_mlp_kernel: on by default for lora and qlora (set lora_*_kernel: false for PEFT's layers): "+why)
	case len(on) > 0:
		t.notModelled = append(t.notModelled, on[0]+": "+why)
	}
}

// truthy says whether a leaf holds true (a bool, or a string YAML read as
// one).
func (l leaf) truthy() bool {
	switch x := l.value.(type) {
	case bool:
		return x
	case string:
		return x == "true" || x == "True"
	}
	return false
}
