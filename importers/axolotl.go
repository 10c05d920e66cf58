package importers

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// axolotlTrainer reads Axolotl's training YAML (axolotl train config.yml)
// as Axolotl runs it, at axolotl-ai-cloud/axolotl 067b021c8: its pydantic
// defaults (src/axolotl/utils/schemas), what normalize_config and
// resolve_dtype derive from them (utils/config/__init__.py), what its
// model loader does to the model (loaders/model.py, loaders/adapter.py)
// and the TrainingArguments its trainer builder writes
// (core/builders/base.py, causal.py). What Axolotl does is written as the
// keys the hf importer reads (tree.derive), and the hf importer reads the
// rest (hfPlanAs: no fp32 norms, which Axolotl casts back, and
// none of TRL's ZeRO-3 reentrancy, AxolotlTrainer being a transformers
// Trainer):
//
//   - micro_batch_size (1) and gradient_accumulation_steps (1)
//     (schemas/training.py l.71-82), at least two of them and batch_size
//     given (schemas/validation.py l.220-226); batch_size changes nothing
//     the step does: gradient_accumulation_steps' default of 1 wins over
//     it (utils/config/__init__.py l.202-207);
//   - sequence_len (512, schemas/config.py l.665); with sample_packing and
//     an attention that packs (flash_attention_2), one row a micro-batch
//     of micro_batch_size x sequence_len tokens (utils/trainer.py
//     l.467-469, multipack_real_batches otherwise, causal.py l.278-282),
//     padded to a multiple of sequence_len rounded up to 64 when
//     pad_to_sequence_len, which sample_packing turns on
//     (validation.py l.229-241, causal.py l.386-394);
//   - bf16 "auto" (schemas/config.py l.559): bf16 where the card computes
//     in it, else fp16; the model loaded in torch_dtype bfloat16 under bf16
//     or bfloat16, float16 under load_in_8bit, fp16 or float16, else
//     float32 (resolve_dtype, utils/config/__init__.py l.156-196), and the
//     Trainer's bf16 autocast on under bf16 or bfloat16 (base.py
//     l.270-278);
//   - optimizer (adamw_torch_fused, schemas/training.py l.122) as
//     TrainingArguments' optim (base.py l.464-467);
//   - gradient_checkpointing (false), its kwargs {"use_reentrant": True}
//     when unset (utils/config/__init__.py l.377-383), except Gemma 4's
//     (l.390-399);
//   - adapter lora or qlora: lora_r and lora_alpha (no default: PEFT gets
//     None), lora_dropout (0.0, schemas/peft.py l.233-238),
//     lora_target_modules and lora_target_linear (every linear layer but
//     the head: find_all_linear_names, loaders/adapter.py l.54-71);
//     qlora with load_in_4bit is bitsandbytes nf4 with double
//     quantization (loaders/model.py l.712-721), lora with load_in_8bit
//     int8 (l.740-743); the adapters in fp32 (get_peft_model's
//     autocast_adapter_dtype) unless peft_autocast_adapter_dtype is false
//     (adapter.py l.367-369);
//   - the weights the adapters leave: the norms, embed_tokens and lm_head
//     cast to fp32, peft's prepare_model_for_kbit_training upcasting the
//     rest of what bitsandbytes does not quantize (peft 0.21.2
//     utils/other.py l.204-209), then, for an adapter, the norms,
//     embed_tokens and lm_head cast back to torch_dtype
//     (_configure_embedding_dtypes, loaders/model.py l.422-477,
//     _convert_embedding_modules_dtype l.1025-1046): all in torch_dtype,
//     as precision "bf16" says. A full fine-tune keeps them fp32 unless its
//     attention casts them back (flash_attention_2; not eager or sdpa,
//     schemas/enums.py l.159), which memsh's precision cannot say: refused;
//   - attn_implementation, or its deprecated flags flash_attention,
//     sdp_attention, eager_attention (enums.py l.118-126); unset,
//     transformers' default (sdpa);
//   - deepspeed (a JSON path) as the Trainer's integration reads it
//     (deepspeed.initialize casts the model to its config's precision),
//     FSDP as axolotlFSDP says (under FSDP Axolotl casts nothing to fp32
//     for good: loaders/model.py l.427-437, l.454-477, l.1003-1009).
//
// rl dpo or ipo as axolotlRL reads it (TRL 1.8's DPOTrainer), rl kto
// (its KTOTrainer), rl grpo or gdpo (its GRPOTrainer).
// The Liger plugin as axolotlLiger reads it; other RL, reward models, other
// plugins, Unsloth, ReLoRA, LISA and the other
// options axolotlRefused lists are config errors naming the key.
var axolotlTrainer = &trainer{
	name:     "axolotl",
	about:    "Axolotl's training YAML (axolotl train) with the model's config.json: adapter lora or qlora (lora_r, lora_alpha, lora_target_modules/lora_target_linear, load_in_4bit/load_in_8bit) or a full fine-tune, micro_batch_size, sequence_len and sample_packing, bf16/fp16, optimizer, gradient_checkpointing, attn_implementation, DeepSpeed",
	exts:     []string{".yaml", ".yml", ".json"},
	parse:    parseHF,
	modelKey: "base_model",
	detect: func(t *tree) bool {
		if _, ok := t.leaves["base_model"]; !ok {
			return false
		}
		for _, k := range []string{"micro_batch_size", "sequence_len", "adapter", "datasets"} {
			if _, ok := t.leaves[k]; ok {
				return true
			}
		}
		return false
	},
	plan:     axolotlPlan,
	noEffect: append(append(append([]string{}, axolotlNoEffect...), axolotlFSDPNoEffect...), axolotlGRPONoEffect...),
}

func axolotlPlan(t *tree, o Options) (*plan, error) {
	for k, l := range t.leaves { // pydantic reads null as the field's default (None)
		if l.value == nil {
			t.used[k] = true
		}
	}
	if err := axolotlRefuse(t); err != nil {
		return nil, err
	}
	model, err := axolotlModelOf(t, o)
	if err != nil {
		return nil, err
	}
	base, err := t.str("base_model", "")
	if err != nil {
		return nil, err
	}
	t.derive("model_name_or_path", base, "base_model")
	if err := axolotlClass(t); err != nil {
		return nil, err
	}
	adapter, err := axolotlAdapter(t)
	if err != nil {
		return nil, err
	}
	attn, err := axolotlAttention(t)
	if err != nil {
		return nil, err
	}
	dtype, err := axolotlDtype(t, o)
	if err != nil {
		return nil, err
	}
	fsdp, err := axolotlFSDP(t, adapter)
	if err != nil {
		return nil, err
	}
	if adapter == "" && dtype != "float32" && attn != "flash_attention_2" && !t.hasUnder("deepspeed") && fsdp == 0 {
		return nil, t.errorf("attn_implementation", "attn_implementation: flash_attention_2 (Axolotl then casts them back), or write the plan in Starlark",
			"a full fine-tune with %s attention keeps embed_tokens, lm_head and the norms in fp32 over %s weights (loaders/model.py _configure_embedding_dtypes), which memsh's precision does not model", attnName(attn), dtype)
	}
	cce, err := axolotlLiger(t, model.kind)
	if err != nil {
		return nil, err
	}
	if err := axolotlQuant(t, adapter, model, fsdp == 0 && !t.hasUnder("deepspeed")); err != nil {
		return nil, err
	}
	if err := axolotlLoRA(t, adapter, fsdp == 1 && o.GPUs > 1); err != nil {
		return nil, err
	}
	var run hfRun
	if err := axolotlCheckpoint(t, model.kind, adapter, &run); err != nil {
		return nil, err
	}
	packedRow, err := axolotlRows(t, o, attn)
	if err != nil {
		return nil, err
	}
	optim, err := t.str("optimizer", "adamw_torch_fused")
	if err != nil {
		return nil, err
	}
	t.derive("optim", optim, "optimizer")
	if optim == "muon" {
		if run.optimizer, err = axolotlMuon(t); err != nil {
			return nil, err
		}
	}
	if err := axolotlCompile(t); err != nil {
		return nil, err
	}
	if t.hasUnder("special_tokens") {
		t.notModelledUnder("special_tokens", "a token the tokenizer lacks grows embed_tokens and lm_head by a row (resize_token_embeddings): memsh keeps the config.json's vocab_size")
	}
	t.notModelledUnder("model_config", "overrides of the model's config.json: pass a config.json with them (--model)")
	t.notModelledIf("tokens", "the tokens added grow embed_tokens and lm_head by a row each (resize_token_embeddings): memsh keeps the config.json's vocab_size")
	// a multimodal run: Axolotl's processor turns the dataset's images into
	// the vision tower's input (utils/collators/mm_chat.py), how many and
	// how large the config does not say
	t.notModelledIf("processor_type", "a multimodal run: the images of its dataset and the vision tower's forward on them are not replayed, only the text tokens; "+
		"write them as train(images = (count, height, width)) in the --emit-star plan")
	autocastAdapters, err := t.boolean("peft_autocast_adapter_dtype", true)
	if err != nil {
		return nil, err
	}
	if run.preference, err = axolotlRL(t, adapter, cce, o.Seq); err != nil {
		return nil, err
	}
	if err := axolotlQAT(t, adapter, &run); err != nil { // axolotl_qat.go
		return nil, err
	}
	if run.quantExperts, err = axolotlMoEQuant(t, adapter); err != nil {
		return nil, err
	}
	var unfrozenGrads bool
	if run.trainable, unfrozenGrads, err = axolotlUnfrozen(t, o, adapter); err != nil {
		return nil, err
	}
	if err := axolotlOrigParams(t, fsdp, run.trainable); err != nil {
		return nil, err
	}
	run.adaptersInBaseDtype, run.packedRow, run.cce = !autocastAdapters, packedRow, cce
	if run.vocabMultiple, err = axolotlVocab(t); err != nil {
		return nil, err
	}
	// load_adapter: model.enable_input_require_grads() (loaders/adapter.py
	// l.427-428); train.py after unfrozen_parameters naming the embeddings
	run.inputGrads = adapter != "" || unfrozenGrads
	if cce && run.offloadActivations {
		t.notModelled = append(t.notModelled, "activation_offloading: Cut Cross-Entropy reads lm_head's weight without running lm_head, so the hook that keeps "+
			"the output head's tensors on the GPU never fires and the loss's saved tensors (the head input, lse, ...) go to the host too: memsh keeps them on the GPU")
	}
	if adapter == "qlora" {
		// bnb_4bit_quant_storage bf16, fp32 for Jamba, Qwen2-MoE and
		// Nemotron-H without DeepSpeed or FSDP (loaders/model.py l.720-729)
		run.quantStorage = "bf16"
		switch model.kind {
		case "jamba", "qwen2_moe", "nemotron_h":
			if fsdp == 0 && !t.hasUnder("deepspeed") {
				run.quantStorage = "fp32"
			}
		}
	}
	o.Seq = 0 // axolotlRows derived the row's length, --seq included
	return hfPlanAs(t, o, run)
}

// has says whether the config sets key (to anything but null).
func (t *tree) has(key string) bool {
	l, ok := t.leaves[key]
	return ok && l.value != nil
}

// hasUnder says whether the config sets key, or a key under it.
func (t *tree) hasUnder(key string) bool {
	for k, l := range t.leaves {
		if (k == key || strings.HasPrefix(k, key+".")) && l.value != nil {
			return true
		}
	}
	return false
}

// attnName is an attn_implementation as the messages say it.
func attnName(impl string) string {
	if impl == "" {
		return "transformers' default (sdpa)"
	}
	return impl
}

// axolotlModel is what Axolotl's choices read of --model's config.json
// (a zero value without one).
type axolotlModel struct {
	// kind is model_type, Axolotl's cfg.model_config_type, on which a
	// few of its choices turn (Gemma 4's checkpointing).
	kind string
	// plain says every weight of the model is a norm (a module named
	// *norm*), embed_tokens, lm_head or an nn.Linear without a bias:
	// Llama and Mistral (modeling_llama.py, modeling_mistral.py at
	// transformers 5.25.0), Qwen3 (modeling_qwen3.py) without
	// attention_bias or mlp_bias.
	plain bool
}

// axolotlModelOf reads --model's config.json, or names the zoo's model
// (hfModels: Llama, Mistral and Gemma are plain, Qwen2 has q, k and v
// biases).
func axolotlModelOf(t *tree, o Options) (axolotlModel, error) {
	if o.ModelData == nil {
		name, _ := t.leaves["base_model"].value.(string)
		return axolotlModel{kind: hfModels[name].modelType(), plain: hfModels[name].fn != "qwen2"}, nil
	}
	text, _ := hf.PythonJSON(o.ModelData)
	mt, err := parseJSON(o.Model, text)
	if err != nil {
		return axolotlModel{}, err
	}
	kind, err := mt.str("model_type", "")
	if err != nil {
		return axolotlModel{}, err
	}
	m := axolotlModel{kind: kind, plain: kind == "llama" || kind == "mistral" || kind == "qwen3"}
	for _, k := range []string{"attention_bias", "mlp_bias"} {
		if b, err := mt.boolean(k, false); err != nil || b {
			m.plain = false
		}
	}
	return m, nil
}

// axolotlClass is model_type, the transformers class Axolotl loads the
// model with: a causal LM.
func axolotlClass(t *tree) error {
	class, err := t.str("model_type", "AutoModelForCausalLM")
	if err != nil {
		return err
	}
	if !strings.HasSuffix(class, "ForCausalLM") {
		return t.errorf("model_type", "AutoModelForCausalLM, or the model's own *ForCausalLM class",
			"class %s is not modelled: memsh replays causal-LM training", quoteKey(class))
	}
	return nil
}

// axolotlDtype is resolve_dtype (utils/config/__init__.py l.156-196) and
// the Trainer's bf16/fp16 (core/builders/base.py l.270-278): it derives
// torch_dtype, bf16 and fp16 and returns the dtype.
func axolotlDtype(t *tree, o Options) (string, error) {
	bf16Auto := true // bf16's default is "auto"; null is None
	bf16 := false
	if l, ok := t.leaves["bf16"]; ok {
		switch v := l.value.(type) {
		case nil:
			bf16Auto = false
		case string:
			if v != "auto" {
				if _, err := t.boolean("bf16", false); err != nil {
					return "", t.errorf("bf16", "true, false or auto", "want true, false or auto, got %s", describe(v))
				}
			}
			bf16Auto = v == "auto"
			bf16, _ = t.boolean("bf16", false)
		default:
			b, err := t.boolean("bf16", false)
			if err != nil {
				return "", t.errorf("bf16", "true, false or auto", "want true, false or auto, got %s", describe(v))
			}
			bf16, bf16Auto = b, false
		}
		t.get("bf16")
	}
	fp16Set := t.has("fp16")
	fp16, err := t.boolean("fp16", false)
	if err != nil {
		return "", err
	}
	bfloat16, err := t.boolean("bfloat16", false)
	if err != nil {
		return "", err
	}
	float16, err := t.boolean("float16", false)
	if err != nil {
		return "", err
	}
	in8, err := t.boolean("load_in_8bit", false)
	if err != nil {
		return "", err
	}
	if bf16Auto && !fp16 {
		bf16 = true
		if d, err := hw.LookupDevice(o.GPU); err == nil && !d.HasBF16() {
			bf16 = false
			if !fp16Set && !float16 {
				fp16 = true
			}
		}
	}
	if bf16 {
		fp16 = false
	}
	dtype := "float32"
	switch {
	case bf16 || bfloat16:
		dtype = "bfloat16"
	case in8 || fp16 || float16:
		dtype = "float16"
	}
	t.derive("torch_dtype", dtype, "bf16")
	t.derive("bf16", bf16 || bfloat16, "bf16")
	t.derive("fp16", fp16, "fp16")
	return dtype, nil
}

// axolotlAttention is attn_implementation, or the deprecated flag that
// says it (schemas/config.py l.1526-1575, enums.py l.118-126): the
// transformers name ("" for transformers' default, sdpa).
func axolotlAttention(t *tree) (string, error) {
	impl, err := t.str("attn_implementation", "")
	if err != nil {
		return "", err
	}
	from := "attn_implementation"
	for _, f := range []struct{ flag, impl string }{
		{"xformers_attention", "xformers"}, {"sage_attention", "sage"}, {"flex_attention", "flex_attention"},
		{"flash_attention", "flash_attention_2"}, {"sdp_attention", "sdpa"}, {"eager_attention", "eager"},
	} {
		on, err := t.boolean(f.flag, false)
		if err != nil {
			return "", err
		}
		switch {
		case !on:
		case impl != "" && from == "attn_implementation":
			return "", t.errorf(f.flag, "Axolotl refuses both: set only attn_implementation", "and attn_implementation are both set")
		case from == "attn_implementation":
			impl, from = f.impl, f.flag
		}
	}
	switch impl {
	case "", "flash_attention_2", "sdpa", "eager":
	default:
		return "", t.errorf(from, "flash_attention_2, sdpa or eager", "attention %s is not modelled", quoteKey(impl))
	}
	if impl != "" {
		t.derive("attn_implementation", impl, from)
	}
	return impl, nil
}

// axolotlCompile is torch_compile: "auto" compiles under torch 2.5.1 and
// later (schemas/config.py l.2040-2058), which memsh's torch is.
func axolotlCompile(t *tree) error {
	v, _ := t.get("torch_compile")
	if v == "auto" {
		t.derive("torch_compile", true, "torch_compile")
		return nil
	}
	_, err := t.boolean("torch_compile", false)
	return err
}

// axolotlCheckpoint is gradient_checkpointing and its kwargs as
// normalize_config leaves them (utils/config/__init__.py l.377-399).
func axolotlCheckpoint(t *tree, modelType, adapter string, run *hfRun) error {
	v, _ := t.get("gradient_checkpointing")
	if s, ok := v.(string); ok {
		switch s {
		case "offload": // schemas/validation.py l.1426-1441: the deprecated spellings
			return axolotlOffload(t, "gradient_checkpointing", true, adapter, run)
		case "offload_disk":
			return t.errorf("gradient_checkpointing", "true, or write the plan in Starlark", "%s (checkpoints offloaded to disk) is not modelled", quoteKey(s))
		}
	}
	on, err := t.boolean("gradient_checkpointing", false)
	if err != nil {
		return err
	}
	if ao, _ := t.get("activation_offloading"); ao != nil && ao != false {
		if !on {
			return t.errorf("activation_offloading", "gradient_checkpointing: true (Axolotl refuses it without: schemas/validation.py check_activation_offloading_wo_gc)",
				"activation offloading requires gradient_checkpointing")
		}
		return axolotlOffload(t, "activation_offloading", ao, adapter, run)
	}
	t.derive("gradient_checkpointing", on, "gradient_checkpointing")
	kwargs := false
	for k := range t.leaves {
		if strings.HasPrefix(k, "gradient_checkpointing_kwargs.") {
			kwargs = true
		}
	}
	if on && modelType == "gemma4" || on && modelType == "gemma4_unified" {
		t.derive("gradient_checkpointing_kwargs.use_reentrant", false, "gradient_checkpointing")
	} else if on && !kwargs {
		t.derive("gradient_checkpointing_kwargs.use_reentrant", true, "gradient_checkpointing")
	}
	return nil
}

// axolotlOffload is activation_offloading true or "legacy" (or the
// deprecated gradient_checkpointing: offload), read from axolotl 067b021c8:
// TRL's OffloadActivations around each training step
// (core/trainers/mixins/activation_checkpointing.py: the saved tensors of
// the model, lm_head's aside, in pinned host memory; "legacy" without its
// CUDA streams), in place of transformers' checkpointing, which the
// builder turns off (core/builders/base.py _configure_gradient_checkpointing).
// A LoRA or QLoRA run offloads every saved tensor and recomputes nothing;
// a full fine-tune wraps each decoder layer in a non-reentrant checkpoint
// (loaders/model.py _apply_activation_checkpointing: ac_wrap_hf_model) and
// offloads their inputs. "disk" and "hidden_states" are other mechanisms,
// refused.
func axolotlOffload(t *tree, key string, mode any, adapter string, run *hfRun) error {
	switch mode {
	case true, "legacy":
	default:
		return t.errorf(key, "true or legacy, or write the plan in Starlark", "activation offloading %s is not modelled", quoteKey(fmt.Sprint(mode)))
	}
	run.offloadActivations = true
	run.offloadSync = mode == "legacy"
	full := adapter == ""
	t.derive("gradient_checkpointing", full, key)
	if full {
		t.derive("gradient_checkpointing_kwargs.use_reentrant", false, key)
	}
	return nil
}

// axolotlRows is micro_batch_size, gradient_accumulation_steps and
// sequence_len, packed or not, as the Trainer's per-device batch and
// max_length: the rows Axolotl's collator builds. It returns the tokens
// of the one packed row a micro-batch is (hfRun.packedRow), 0 for rows of
// max_length.
func axolotlRows(t *tree, o Options, attn string) (int64, error) {
	set := 0
	for _, k := range []string{"micro_batch_size", "gradient_accumulation_steps", "batch_size"} {
		if n, ok := t.leaves[k]; ok && n.value != nil && n.value != int64(0) {
			set++
		}
	}
	if set < 2 {
		return 0, &Error{File: t.file, Key: "micro_batch_size", Msg: "Axolotl wants at least two of micro_batch_size, gradient_accumulation_steps, batch_size (schemas/validation.py)",
			Hint: "say the per-GPU batch and the accumulation: micro_batch_size: 1, gradient_accumulation_steps: 8"}
	}
	if _, err := t.integer("batch_size", 0, 1, 1<<30); err != nil {
		return 0, err
	}
	micro, err := t.integer("micro_batch_size", 1, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	accum, err := t.integer("gradient_accumulation_steps", 1, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	t.derive("gradient_accumulation_steps", accum, "gradient_accumulation_steps")
	seq, err := t.integer("sequence_len", 512, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	if o.Seq > 0 {
		seq = o.Seq
	}
	packing, err := t.boolean("sample_packing", false)
	if err != nil {
		return 0, err
	}
	if packing {
		if on, err := t.boolean("pretraining_dataset", false); err == nil && on {
			return 0, t.errorf("pretraining_dataset", "leave it out, or write the plan in Starlark", "a streamed pretraining dataset is not modelled")
		}
	}
	pad, err := t.boolean("pad_to_sequence_len", packing)
	if err != nil {
		return 0, err
	}
	multiple, err := t.integer("pad_to_multiple_of", 64, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	roundUp := func(n, m int64) int64 { return (n + m - 1) / m * m }
	full := roundUp(seq, multiple) // pad_to_sequence_len's multiple (causal.py l.386-390)
	realBatches, err := t.boolean("multipack_real_batches", attn != "flash_attention_2")
	if err != nil {
		return 0, err
	}
	rows, length := micro, seq
	switch {
	case packing && !realBatches: // one bin of micro x seq tokens
		rows, length = 1, micro*seq
		if pad {
			length = roundUp(micro*seq, full)
		}
	case pad:
		length = full
	case o.Seq == 0: // the longest row, padded to a multiple of 64 (or not, when false)
		if !t.has("pad_to_sequence_len") {
			length = roundUp(seq, multiple)
		}
		t.notModelled = append(t.notModelled, fmt.Sprintf("sequence_len: unpacked rows are padded to the batch's longest, at most %d tokens: memsh replays rows of %d (--seq N for another length)", length, length))
	}
	if packing && attn != "flash_attention_2" {
		t.notModelled = append(t.notModelled, fmt.Sprintf("sample_packing: %s attention over packed rows masks each sequence from the others "+
			"(a block-diagonal [%d, 1, %d, %d] mask, or torch's varlen_attn): memsh replays causal attention over the whole row", attnName(attn), rows, length, length))
	}
	if length > 1<<24 {
		return 0, t.errorf("sequence_len", "a shorter sequence_len or a smaller micro_batch_size",
			"a row of %d tokens (micro_batch_size x sequence_len when packed) is out of range (want at most %d)", length, 1<<24)
	}
	t.derive("per_device_train_batch_size", micro, "micro_batch_size")
	if rows == 1 && packing && !realBatches {
		t.derive("max_length", seq, "sequence_len")
		return length, nil
	}
	t.derive("max_length", length, "sequence_len")
	return 0, nil
}
