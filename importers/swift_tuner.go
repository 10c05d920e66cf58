package importers

import (
	"fmt"
	"strconv"
	"strings"
)

// What ms-swift trains and in which dtypes: its tuner, the weights' dtype,
// quantization, LoRA's adapters, a full fine-tune's frozen parts.

// swiftTuner is --tuner_type (ms-swift 4.x) or --train_type (its name in
// 3.x; 4.x refuses it as an unknown argument): lora or full.
func swiftTuner(t *tree) (string, error) {
	key := "tuner_type"
	t.get(key)
	if l, ok := t.leaves["train_type"]; ok && l.value != nil {
		if l, both := t.leaves["tuner_type"]; both && l.value != nil {
			return "", t.errorf("train_type", "keep --tuner_type, its name from ms-swift 4.0 (4.x refuses --train_type)", "and tuner_type are both given")
		}
		key = "train_type"
	}
	kind, err := t.str(key, "lora")
	if err != nil {
		return "", err
	}
	if kind != "lora" && kind != "full" {
		return "", t.errorf(key, "memsh replays lora and full", "tuner %s is not modelled", quoteKey(kind))
	}
	if backend, err := t.str("tuner_backend", "peft"); err != nil {
		return "", err
	} else if backend != "peft" {
		return "", t.errorf("tuner_backend", "memsh replays PEFT's adapters: leave it out (peft)", "tuner backend %s is not modelled", quoteKey(backend))
	}
	return kind, nil
}

// swiftTunerKey is the key that named the tuner (tuner_type, or 3.x's
// train_type), for the derived keys' errors.
func swiftTunerKey(t *tree) string {
	if l, ok := t.leaves["train_type"]; ok && l.value != nil {
		return "train_type"
	}
	return "tuner_type"
}

// swiftDtype is --torch_dtype, else the model config.json's dtype, else
// bf16 (get_default_torch_dtype on a GPU with bf16), and the Trainer's
// bf16 or fp16 from it (_init_mixed_precision).
func swiftDtype(t *tree, o Options) error {
	dtype, err := t.str("torch_dtype", "")
	if err != nil {
		return err
	}
	switch dtype {
	case "":
		if dtype, err = swiftConfigDtype(t, o); err != nil {
			return err
		}
		t.derive("torch_dtype", dtype, "model")
	case "bfloat16", "float16", "float32":
	default:
		return t.errorf("torch_dtype", "bfloat16, float16 or float32", "unknown dtype %s", quoteKey(dtype))
	}
	bf16, err := t.boolean("bf16", dtype == "bfloat16")
	if err != nil {
		return err
	}
	fp16, err := t.boolean("fp16", dtype != "bfloat16")
	if err != nil {
		return err
	}
	if _, ok := t.leaves["bf16"]; !ok {
		t.derive("bf16", bf16, "torch_dtype")
	}
	if _, ok := t.leaves["fp16"]; !ok {
		t.derive("fp16", fp16, "torch_dtype")
	}
	return nil
}

// swiftConfigDtype is the dtype ms-swift loads a model in when
// --torch_dtype is unset: its config.json's dtype (or torch_dtype), a zoo
// model's checkpoint dtype, else bfloat16.
func swiftConfigDtype(t *tree, o Options) (string, error) {
	if o.ModelData != nil {
		mt, err := parseJSON(o.Model, o.ModelData)
		if err != nil {
			return "", err
		}
		for _, key := range []string{"dtype", "torch_dtype"} {
			switch d, _ := mt.str(key, ""); d {
			case "bfloat16", "float16", "float32":
				return d, nil
			case "":
			default:
				return "", t.errorf("model", "set --torch_dtype bfloat16 (or float16, float32)", "the model's dtype %s is not modelled", quoteKey(d))
			}
		}
		return "bfloat16", nil
	}
	name, _ := t.str("model", "")
	if m, ok := hfModels[name]; ok && o.Model == "" {
		return zooCheckpointDtype(m), nil
	}
	return "bfloat16", nil
}

// swiftQuant is --quant_method bnb with --quant_bits 4 (nf4, double
// quantization by default: QuantizeArguments) or 8.
func swiftQuant(t *tree, kind string) error {
	method, err := t.str("quant_method", "")
	if err != nil {
		return err
	}
	bits, err := t.integer("quant_bits", 0, 1, 8)
	if err != nil {
		return err
	}
	kindQ, err := t.str("bnb_4bit_quant_type", "nf4")
	if err != nil {
		return err
	}
	double, err := t.boolean("bnb_4bit_use_double_quant", true)
	if err != nil {
		return err
	}
	t.get("bnb_4bit_compute_dtype") // the adapters' compute dtype: the weights are dequantized to it, transients only
	storage, err := t.str("bnb_4bit_quant_storage", "")
	if err != nil {
		return err
	}
	switch {
	case method == "" && bits == 0:
		return nil
	case method != "bnb":
		return t.errorf("quant_method", "memsh models bitsandbytes: --quant_method bnb --quant_bits 4", "quantization method %s is not modelled", quoteKey(method))
	case kind != "lora":
		return t.errorf("quant_bits", "train LoRA adapters on a quantized model: --tuner_type lora", "a quantized model's weights do not train (tuner %s)", quoteKey(kind))
	case bits == 4:
		if kindQ != "nf4" {
			return t.errorf("bnb_4bit_quant_type", "memsh models nf4", "quant type %s is not modelled", quoteKey(kindQ))
		}
		t.derive("load_in_4bit", true, "quant_bits")
		t.derive("use_bnb_nested_quant", double, "bnb_4bit_use_double_quant")
		if storage != "" {
			t.notModelled = append(t.notModelled, "bnb_4bit_quant_storage: the 4-bit codes stored as "+storage+" (the same bytes: FSDP's view)")
		}
	case bits == 8:
		t.derive("load_in_8bit", true, "quant_bits")
	default:
		return t.errorf("quant_bits", "4 or 8 with bitsandbytes", "%d bits are not modelled", bits)
	}
	return nil
}

// swiftLoRA is --tuner_type lora's adapters: PEFT's LoraConfig from
// TunerArguments (swift/pipelines/train/tuner.py prepare_adapter). It
// says whether the adapters are in the base weights' dtype (--lora_dtype
// the weights' own).
func swiftLoRA(t *tree, kind string) (bool, error) {
	rank, err := t.integer("lora_rank", 8, 1, 1<<16)
	if err != nil {
		return false, err
	}
	alpha, err := t.integer("lora_alpha", 32, 1, 1<<20)
	if err != nil {
		return false, err
	}
	dropout, err := t.probability("lora_dropout", 0.05)
	if err != nil {
		return false, err
	}
	v, _ := t.get("target_modules")
	var mods []any
	switch x := v.(type) {
	case nil:
		mods = []any{"all-linear"}
	case string:
		mods = []any{x}
	case []any:
		mods = x
	default:
		return false, t.errorf("target_modules", "module names, or all-linear", "want names, got %s", describe(v))
	}
	for _, m := range mods {
		s, ok := m.(string)
		if !ok {
			return false, t.errorf("target_modules", "module names, or all-linear", "want names, got an item %s", describe(m))
		}
		if s == "all-embedding" || s == "all-norm" || strings.HasPrefix(s, "all-") && s != "all-linear" {
			return false, t.errorf("target_modules", "all-linear, or module names (q_proj, v_proj, ...)", "%s is not modelled", quoteKey(s))
		}
	}
	regex, err := t.str("target_regex", "")
	if err != nil {
		return false, err
	}
	params, err := t.strs("target_parameters")
	if err != nil {
		return false, err
	}
	dtype, err := t.str("lora_dtype", "")
	if err != nil {
		return false, err
	}
	if kind != "lora" {
		return false, nil
	}
	t.derive("use_peft", true, swiftTunerKey(t))
	t.derive("lora_r", rank, "lora_rank")
	t.derive("lora_alpha", alpha, "lora_alpha")
	t.derive("lora_dropout", dropout, "lora_dropout")
	if regex != "" { // TunerArguments.__post_init__: target_regex replaces target_modules
		t.derive("lora_target_modules", regex, "target_regex")
	} else {
		t.derive("lora_target_modules", mods, "target_modules")
	}
	if len(params) > 0 {
		list := make([]any, len(params))
		for i, p := range params {
			list[i] = p
		}
		t.derive("lora_target_parameters", list, "target_parameters")
	}
	t.notModelledIf("use_rslora", "rank-stabilised scaling (the same tensors)")
	t.notModelledIf("use_dora", "DoRA's magnitude vectors and the weight norm it computes")
	if v, _ := t.get("modules_to_save"); v != nil {
		if l, ok := v.([]any); !ok || len(l) > 0 {
			t.notModelled = append(t.notModelled, "modules_to_save: modules trained in full beside the adapters")
		}
	}
	if b, err := t.str("lora_bias", "none"); err != nil {
		return false, err
	} else if b != "none" {
		t.notModelled = append(t.notModelled, "lora_bias: "+b+": the target layers' biases train (a bias's gradient and AdamW state)")
	}
	if w, err := t.str("init_weights", "true"); err != nil {
		return false, err
	} else if w != "true" && w != "gaussian" && w != "false" {
		t.notModelled = append(t.notModelled, "init_weights: "+w+": the adapters' initialisation (PiSSA's, OLoRA's, LoftQ's or LoRA-GA's SVD and passes before training), transients of the setup")
	}
	base, _ := t.str("torch_dtype", "")
	switch dtype {
	case "", "float32": // PEFT's autocast_adapter_dtype: fp32 adapters
		return false, nil
	case base:
		return true, nil
	}
	return false, t.errorf("lora_dtype", "leave it out (fp32 adapters) or give the weights' dtype "+base, "adapters in %s over %s weights are not modelled", dtype, base)
}

// swiftFull is what --tuner_type full reads beyond the weights: the
// parameters it freezes or trains by name (TunerArguments), which a
// text model's full fine-tune does not change otherwise.
func swiftFull(t *tree, kind string) error {
	for _, k := range []string{"freeze_parameters", "freeze_parameters_regex", "trainable_parameters", "trainable_parameters_regex"} {
		if v, _ := t.get(k); v != nil {
			if l, ok := v.([]any); ok && len(l) == 0 {
				continue
			}
			if kind == "full" {
				t.notModelled = append(t.notModelled, k+": parameters frozen or trained by name beside the full fine-tune (their gradients and AdamW state)")
			}
		}
	}
	ratio, err := t.integerOrFloat("freeze_parameters_ratio")
	if err != nil {
		return err
	}
	if ratio != 0 && kind == "full" {
		t.notModelled = append(t.notModelled, "freeze_parameters_ratio: the first "+strconv.FormatFloat(ratio*100, 'g', 4, 64)+"% of the parameters frozen (no gradient or AdamW state)")
	}
	// a multimodal model's tower's checkpointing (vit_gradient_checkpointing:
	// the tower runs under no_grad when frozen, swiftMultimodal) and its
	// learning rates (param groups of the same optimizer)
	for _, k := range []string{"vit_gradient_checkpointing", "vit_lr", "aligner_lr"} {
		t.get(k)
	}
	return nil
}

// integerOrFloat reads a number key; 0 when absent.
func (t *tree) integerOrFloat(key string) (float64, error) {
	v, _ := t.get(key)
	if v == nil {
		return 0, nil
	}
	f, ok := toFloat(v)
	if !ok {
		return 0, t.errorf(key, "", "want a number, got %s", describe(v))
	}
	return f, nil
}

// swiftMultimodal lists what ms-swift freezes in a multimodal model (a
// config.json with a vision_config) that memsh's plan trains: with
// --freeze_vit and --freeze_aligner (true by default, TunerArguments)
// LoRA's all-linear targets the language model's linear layers only and
// a full fine-tune freezes the vision tower and the aligner
// (tuner_args.py _init_multimodal_full, get_target_modules), where
// lora(targets = ["all-linear"]) and a full plan train the tower's too.
func swiftMultimodal(t *tree, o Options, kind string) error {
	vit, err := t.boolean("freeze_vit", true)
	if err != nil {
		return err
	}
	aligner, err := t.boolean("freeze_aligner", true)
	if err != nil {
		return err
	}
	llm, err := t.boolean("freeze_llm", false)
	if err != nil {
		return err
	}
	if o.ModelData == nil {
		return nil
	}
	mt, err := parseJSON(o.Model, o.ModelData)
	if err != nil {
		return err
	}
	multimodal := false
	for k := range mt.leaves {
		multimodal = multimodal || strings.HasPrefix(k, "vision_config.")
	}
	if multimodal && (vit || aligner || llm) {
		t.notModelled = append(t.notModelled, fmt.Sprintf("freeze_vit %v, freeze_aligner %v, freeze_llm %v: ms-swift trains only the parts not frozen "+
			"(LoRA's all-linear on their linear layers, a %s fine-tune of them); memsh's plan makes the vision tower's and aligner's weights "+
			"trainable too (adapters on their linear layers; in full, their gradients and optimizer states)", vit, aligner, llm, kind))
	}
	return nil
}
