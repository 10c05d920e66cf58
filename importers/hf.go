package importers

import (
	"slices"
	"strings"
)

// hfTrainer reads Hugging Face TrainingArguments, or TRL's SFTConfig with
// its ModelConfig (the YAML of `trl sft --config`, alignment-handbook's
// recipes, or TrainingArguments.to_json_string's JSON), as transformers'
// Trainer and TRL's SFTTrainer read them: absent keys take
// TrainingArguments' defaults (transformers training_args.py), except the
// few TRL's SFTConfig defaults differently across its versions, which must
// be given.
var hfTrainer = &trainer{
	name:     "hf",
	about:    "Hugging Face TrainingArguments or TRL SFTConfig (JSON or YAML) with the model's config.json: per-device batch, gradient accumulation, bf16/fp16 and the model's dtype, gradient checkpointing, optim, max_length and packing, LoRA/QLoRA (TRL's ModelConfig), FSDP, the accelerate config it is launched with (accelerate_config=)",
	exts:     []string{".json", ".yaml", ".yml"},
	parse:    parseHF,
	modelKey: "model_name_or_path",
	detect: func(t *tree) bool {
		_, ok := t.leaves["per_device_train_batch_size"]
		return ok
	},
	plan: hfPlan,
	noEffect: append([]string{
		"output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "eval_strategy", "evaluation_strategy", "eval_steps",
		"per_device_eval_batch_size", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
		"num_train_epochs", "max_steps", "lr_scheduler_type", "lr_scheduler_kwargs.*", "warmup_ratio", "warmup_steps", "log_level",
		"logging_dir", "logging_strategy", "logging_steps", "logging_first_step", "save_strategy", "save_steps", "save_total_limit",
		"save_only_model", "seed", "data_seed", "report_to", "run_name", "push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo",
		"remove_unused_columns", "dataloader_num_workers", "dataloader_pin_memory", "dataloader_drop_last", "disable_tqdm",
		"load_best_model_at_end", "metric_for_best_model", "label_names", "ddp_timeout", "ddp_find_unused_parameters",
		"gradient_checkpointing_kwargs.preserve_rng_state", "gradient_checkpointing_kwargs.determinism_check",
		"activation_checkpointing_kwargs.preserve_rng_state", "activation_checkpointing_kwargs.determinism_check", "model_revision", "trust_remote_code", "chat_template", "dataset_name", "dataset_config",
		"dataset_train_split", "dataset_test_split", "dataset_mixture.*", "dataset_num_proc", "dataset_text_field", "dataset_kwargs.*",
		"eos_token", "pad_token", "completion_only_loss", "assistant_only_loss", "lora_task_type", "bnb_4bit_quant_storage",
	}, append(append(append(hfDPONoEffect, hfKTONoEffect...), hfGRPONoEffect...), hfFSDPOrigParams...)...),
}

func parseHF(file string, data []byte) (*tree, error) {
	if strings.EqualFold(extOf(file), ".json") {
		return parseJSON(file, data)
	}
	return parseYAML(file, data)
}

func extOf(file string) string {
	if i := strings.LastIndexByte(file, '.'); i >= 0 && !strings.ContainsAny(file[i:], "/\\") {
		return file[i:]
	}
	return ""
}

// hfModels maps a model_name_or_path on the Hub to the zoo model of the
// same shapes; any other needs --model config.json.
var hfModels = map[string]zooModel{
	"mistralai/Mistral-7B-v0.1":     {"mistral", "7b"},
	"meta-llama/Llama-2-7b-hf":      {"llama", "7b"},
	"meta-llama/Llama-2-13b-hf":     {"llama", "13b"},
	"meta-llama/Llama-2-70b-hf":     {"llama", "70b"},
	"meta-llama/Meta-Llama-3-8B":    {"llama", "llama3-8b"},
	"meta-llama/Llama-3.1-8B":       {"llama", "llama3-8b"},
	"meta-llama/Meta-Llama-3.1-8B":  {"llama", "llama3-8b"},
	"meta-llama/Meta-Llama-3-70B":   {"llama", "llama3-70b"},
	"meta-llama/Llama-3.1-70B":      {"llama", "llama3-70b"},
	"meta-llama/Meta-Llama-3.1-70B": {"llama", "llama3-70b"},
	"google/gemma-7b":               {"gemma", "7b"},
	"google/gemma-2b":               {"gemma", "2b"},
	"Qwen/Qwen2-7B":                 {"qwen2", "7b"},
	"Qwen/Qwen2.5-7B":               {"qwen2", "7b"},
	// The instruct and chat tunings of those, and the mirrors the
	// trainers' examples name (NousResearch's re-uploads of Meta's
	// weights): the same shapes.
	"meta-llama/Llama-2-7b-chat-hf":         {"llama", "7b"},
	"NousResearch/Llama-2-7b-hf":            {"llama", "7b"},
	"meta-llama/Meta-Llama-3-8B-Instruct":   {"llama", "llama3-8b"},
	"meta-llama/Llama-3.1-8B-Instruct":      {"llama", "llama3-8b"},
	"meta-llama/Meta-Llama-3.1-8B-Instruct": {"llama", "llama3-8b"},
	"NousResearch/Meta-Llama-3-8B":          {"llama", "llama3-8b"},
	"NousResearch/Meta-Llama-3-8B-Instruct": {"llama", "llama3-8b"},
	"NousResearch/Meta-Llama-3.1-8B":        {"llama", "llama3-8b"},
	"meta-llama/Meta-Llama-3-70B-Instruct":  {"llama", "llama3-70b"},
	"meta-llama/Llama-3.1-70B-Instruct":     {"llama", "llama3-70b"},
	"meta-llama/Llama-3.3-70B-Instruct":     {"llama", "llama3-70b"},
	"mistralai/Mistral-7B-Instruct-v0.1":    {"mistral", "7b"},
	// v0.2 keeps v0.1's shapes and 32,000-token vocabulary (its rope_theta
	// and no sliding window change nothing the zoo's mistral() replays)
	"mistralai/Mistral-7B-Instruct-v0.2": {"mistral", "7b"},
	"mistralai/Mistral-7B-v0.3":          {"mistral", "7b-v0.3"},
	"mistralai/Mistral-7B-Instruct-v0.3": {"mistral", "7b-v0.3"},
	"google/gemma-7b-it":                 {"gemma", "7b"},
	"google/gemma-2b-it":                 {"gemma", "2b"},
	"Qwen/Qwen2-7B-Instruct":             {"qwen2", "7b"},
	"Qwen/Qwen2.5-7B-Instruct":           {"qwen2", "7b"},
	// The zoo's other dense models (stdlib/llm/dense.star names each
	// checkpoint; Qwen3-4B's 2507 tunings keep its shapes).
	"meta-llama/Llama-3.2-1B":            {"llama", "llama3.2-1b"},
	"meta-llama/Llama-3.2-1B-Instruct":   {"llama", "llama3.2-1b"},
	"NousResearch/Llama-3.2-1B":          {"llama", "llama3.2-1b"},
	"meta-llama/Llama-3.2-3B":            {"llama", "llama3.2-3b"},
	"meta-llama/Llama-3.2-3B-Instruct":   {"llama", "llama3.2-3b"},
	"Qwen/Qwen3-0.6B":                    {"qwen3", "0.6b"},
	"Qwen/Qwen3-0.6B-Base":               {"qwen3", "0.6b"},
	"Qwen/Qwen3-1.7B":                    {"qwen3", "1.7b"},
	"Qwen/Qwen3-1.7B-Base":               {"qwen3", "1.7b"},
	"Qwen/Qwen3-4B":                      {"qwen3", "4b"},
	"Qwen/Qwen3-4B-Base":                 {"qwen3", "4b"},
	"Qwen/Qwen3-4B-Instruct-2507":        {"qwen3", "4b"},
	"Qwen/Qwen3-4B-Thinking-2507":        {"qwen3", "4b"},
	"Qwen/Qwen3-8B":                      {"qwen3", "8b"},
	"Qwen/Qwen3-8B-Base":                 {"qwen3", "8b"},
	"Qwen/Qwen3-14B":                     {"qwen3", "14b"},
	"Qwen/Qwen3-14B-Base":                {"qwen3", "14b"},
	"Qwen/Qwen3-32B":                     {"qwen3", "32b"},
	"microsoft/Phi-3-mini-4k-instruct":   {"phi3", "mini"},
	"microsoft/Phi-3-mini-128k-instruct": {"phi3", "mini"},
	"microsoft/phi-4":                    {"phi4", "14b"},
	// Qwen2 and Qwen2.5's other sizes (the zoo's qwen2(), from torchtune's
	// builders of those checkpoints).
	"Qwen/Qwen2-0.5B":            {"qwen2", "0.5b"},
	"Qwen/Qwen2-0.5B-Instruct":   {"qwen2", "0.5b"},
	"Qwen/Qwen2.5-0.5B":          {"qwen2", "0.5b"},
	"Qwen/Qwen2.5-0.5B-Instruct": {"qwen2", "0.5b"},
	"Qwen/Qwen2-1.5B":            {"qwen2", "1.5b"},
	"Qwen/Qwen2-1.5B-Instruct":   {"qwen2", "1.5b"},
	"Qwen/Qwen2.5-1.5B":          {"qwen2", "1.5b"},
	"Qwen/Qwen2.5-1.5B-Instruct": {"qwen2", "1.5b"},
	"Qwen/Qwen2.5-3B":            {"qwen2", "3b"},
	"Qwen/Qwen2.5-3B-Instruct":   {"qwen2", "3b"},
	"Qwen/Qwen2.5-14B":           {"qwen2", "14b"},
	"Qwen/Qwen2.5-14B-Instruct":  {"qwen2", "14b"},
	"Qwen/Qwen2.5-32B":           {"qwen2", "32b"},
	"Qwen/Qwen2.5-32B-Instruct":  {"qwen2", "32b"},
	"Qwen/Qwen2-72B":             {"qwen2", "72b"},
	"Qwen/Qwen2-72B-Instruct":    {"qwen2", "72b"},
	"Qwen/Qwen2.5-72B":           {"qwen2", "72b"},
	"Qwen/Qwen2.5-72B-Instruct":  {"qwen2", "72b"},
}

// hfAttention maps attn_implementation to the zoo's attention kernels.
var hfAttention = map[string]string{"flash_attention_2": "flash", "sdpa": "sdpa", "eager": "eager"}

// hfOptimizers maps TrainingArguments.optim (OptimizerNames) to memsh.
var hfOptimizers = map[string]string{
	"adamw_torch_fused": "adamw(fused = True)", "adamw_torch": "adamw()", "adamw_hf": "adamw()",
	"adamw_bnb_8bit": "adamw8bit()", "adamw_8bit": "adamw8bit()", "paged_adamw_8bit": "paged_adamw8bit()",
	"paged_adamw_32bit": "paged_adamw()", "adafactor": "adafactor()", "sgd": "sgd()", "lion_32bit": "lion()",
}

// hfLoRA maps PEFT target module names to memsh's LoRA roles.
var hfLoRA = map[string]string{"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate",
	"up_proj": "up", "down_proj": "down", "all-linear": "all-linear", "lm_head": "lm_head"}

// hfRun is what a trainer built on transformers' Trainer does beyond the
// TrainingArguments the hf importer reads: TRL's SFTTrainer (trlRun)
// or LLaMA-Factory's (llamafactory.go).
type hfRun struct {
	// kbitNormsFP32: a quantized model's norms upcast to fp32 (peft's
	// prepare_model_for_kbit_training, which TRL calls).
	kbitNormsFP32 bool
	// zero3PEFTReentrant: a PEFT model checkpoints reentrant under
	// DeepSpeed ZeRO-3 whatever the config says (TRL, hfCheckpoint).
	zero3PEFTReentrant bool
	// adaptersInBaseDtype: LoRA's adapters in the base layer's dtype
	// (get_peft_model(autocast_adapter_dtype=False)), not fp32.
	adaptersInBaseDtype bool
	// packedRow, when positive, is the tokens of the one row each
	// micro-batch is (Axolotl's multipack sampler: per_device_train_batch_size
	// sequences packed into a row): the plan's batch 1 and seq packedRow,
	// while DeepSpeed's micro batch stays per_device_train_batch_size.
	packedRow int64
	// cce: the loss is Cut Cross-Entropy (Axolotl's CutCrossEntropyPlugin,
	// train(loss_chunks = "cce")), beside Liger's other kernels if any.
	cce bool
	// inputGrads: the trainer calls enable_input_require_grads whenever it
	// trains adapters, checkpointed or not (Axolotl's load_adapter).
	inputGrads bool
	// offloadActivations: the saved tensors in pinned host memory (Axolotl's
	// activation_offloading, TRL's OffloadActivations); offloadSync: its
	// copies on the compute stream ("legacy").
	offloadActivations, offloadSync bool
	// quantStorage is the float dtype a 4-bit model's codes are stored in
	// (bitsandbytes' bnb_4bit_quant_storage, train(quant_storage=)); ""
	// leaves bitsandbytes' uint8.
	quantStorage string
	// preference is train(preference=)'s expression (Axolotl's rl:
	// axolotlRL), "" for a language model's loss.
	preference string
	// quantExperts: the 3-D MoE experts quantized too (Axolotl's
	// quantize_moe_experts: axolotlMoEQuant).
	quantExperts bool
	// sftTrainer: the run is TRL's SFTTrainer (or the plain Trainer), whose
	// release memsh.trl may say (hfTRL).
	sftTrainer bool
	// trainable is train(trainable=)'s list (Axolotl's
	// unfrozen_parameters: axolotlUnfrozen), "" when every parameter trains.
	trainable string
	// optimizer is the optimizer the trainer builds itself in place of
	// TrainingArguments.optim's (Axolotl's muon: axolotlMuon), "" for
	// optim's.
	optimizer string
	// vocabMultiple pads the model's vocabulary up to a multiple of it
	// (Axolotl's resize_token_embeddings_to_32x: axolotlVocab); 0 keeps it.
	vocabMultiple int64
	// qat is train(qat=)'s scheme (Axolotl's qat: block, axolotlQAT), ""
	// for none; qatGroup its group size.
	qat      string
	qatGroup int64
	// logitsLoss: the trainer calls the model without labels, holds its
	// logits in fp32 from the forward on until the next micro-batch's
	// forward returns and scores them with flash-attn's cross-entropy
	// (OpenRLHF's Actor and SFT loop: hf_config(loss =
	// "flash_cross_entropy", forward_upcast = True), train(keep_logits =
	// "next")); hf_config's models only.
	logitsLoss bool
}

// trlRun is TRL's SFTTrainer, and the plain Trainer.
var trlRun = hfRun{kbitNormsFP32: true, zero3PEFTReentrant: true, sftTrainer: true}

func hfPlan(t *tree, o Options) (*plan, error) {
	run := trlRun
	pref, err := hfPreference(t) // a DPOConfig: TRL's DPOTrainer
	if err != nil {
		return nil, err
	}
	if pref != "" {
		run.preference, run.sftTrainer = pref, false
	}
	if !strings.HasPrefix(pref, "grpo(") {
		return hfPlanAs(t, o, run)
	}
	if err := hfGRPODefaults(t, o); err != nil {
		return nil, err
	}
	p, err := hfPlanAs(t, o, run)
	if err == nil && strings.Contains(pref, `vllm = "colocate"`) { // the advice's vllm_sleep: the engine asleep
		p.keyOf(t, "preference", "vllm_enable_sleep_mode")
	}
	return p, err
}

// hfPlanAs is hfPlan for a trainer that runs as run says.
func hfPlanAs(t *tree, o Options, run hfRun) (*plan, error) {
	p := &plan{}
	o, err := hfAccelerate(t, o)
	if err != nil {
		return nil, err
	}
	if err := hfModel(t, o, p, run); err != nil {
		return nil, err
	}
	batch, err := t.integer("per_device_train_batch_size", 8, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	seq, err := hfSeq(t, o)
	if err != nil {
		return nil, err
	}
	if run.packedRow > 0 {
		p.set("batch", num(1))
		p.set("seq", num(run.packedRow))
	} else {
		p.set("batch", num(batch))
		p.keyOf(t, "batch", "per_device_train_batch_size")
		p.set("seq", num(seq))
	}
	accum, err := t.integer("gradient_accumulation_steps", 1, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if accum > 1 {
		p.set("grad_accum", num(accum))
	}
	p.keyOf(t, "grad_accum", "gradient_accumulation_steps")
	optim, err := t.str("optim", "adamw_torch_fused") // training_args.py's default with torch >= 2.8
	if err != nil {
		return nil, err
	}
	expr, ok := hfOptimizers[optim]
	if run.optimizer != "" { // the trainer's own (Axolotl's Muon)
		expr, ok = run.optimizer, true
	}
	if !ok {
		return nil, t.errorf("optim", "memsh knows adamw_torch(_fused), adamw_8bit, paged_adamw_8bit/32bit, adafactor, sgd, lion_32bit", "optimizer %s is not modelled", quoteKey(optim))
	}
	ds, err := hfDeepSpeedConfig(t, o)
	if err != nil {
		return nil, err
	}
	if ds == nil {
		if err := hfPrecision(t, o, p, p.quantized() && run.kbitNormsFP32); err != nil {
			return nil, err
		}
		p.set("optimizer", expr)
		if err := hfClip(t, p); err != nil {
			return nil, err
		}
	}
	if err := hfCheckpoint(t, p, ds, run); err != nil {
		return nil, err
	}
	// use_liger_kernel: _apply_liger_kernel_to_instance with its defaults
	// (rope, rms_norm, swiglu, fused_linear_cross_entropy); memsh replays
	// the fused loss, the norms and SwiGLU (docs/liger.md), not RoPE.
	// Axolotl's Cut Cross-Entropy takes the loss's place (hfRun.cce).
	liger, err := t.boolean("use_liger_kernel", false)
	if err != nil {
		return nil, err
	}
	if run.preference != "" {
		p.set("preference", run.preference)
	}
	if run.trainable != "" {
		p.set("trainable", run.trainable)
	}
	trlHead := false
	if run.sftTrainer {
		if trlHead, err = hfTRL(t); err != nil {
			return nil, err
		}
	}
	switch {
	case trlHead: // TRL 1.15's SFTTrainer keeps Liger's layer kernels, its own head
		p.set("loss_chunks", str("trl"))
	case run.cce:
		p.set("loss_chunks", str("cce"))
	case liger:
		p.set("loss_chunks", str("liger"))
	}
	if run.qat != "" {
		p.set("qat", str(run.qat))
		if run.qatGroup != 256 {
			p.set("qat_group_size", num(run.qatGroup))
		}
		if trlHead || run.cce || liger { // the fused heads read lm_head.weight: its fake quantizers never run
			p.set("qat_head", "False")
		}
	}
	if liger {
		p.set("liger_kernels", "True")
		key := "use_liger_kernel" // or the file's key it was derived from (Axolotl's liger_rope)
		if src, ok := t.from[key]; ok {
			key = src
		}
		t.notModelled = append(t.notModelled, key+": Liger's RoPE kernel (in place on copies of q and k: transients only)")
	}
	if run.offloadActivations {
		a := kw("activations", str("cpu"))
		if run.offloadSync {
			a += ", " + kw("streams", "False")
		}
		p.offload(a)
	}
	if compiled, err := t.boolean("torch_compile", false); err != nil {
		return nil, err
	} else if compiled {
		p.set("compile", "True")
	}
	p.keyOf(t, "compile", "torch_compile")
	p.set("gpu", str(o.GPU))
	if ds != nil {
		err = hfDeepSpeed(t, ds, o, p, batch, accum, expr)
	} else {
		err = hfLayout(t, o, p)
	}
	if err == nil && trlHead {
		err = hfTRLLayout(t, p)
	}
	return p, err
}

// hfModel is the model (zoo by Hub name, or --model), its attention
// kernel, and TRL's ModelConfig adapters and quantization.
func hfModel(t *tree, o Options, p *plan, run hfRun) error {
	name, err := t.str("model_name_or_path", "")
	if err != nil {
		return err
	}
	attnName, err := t.str("attn_implementation", "sdpa")
	if err != nil {
		return err
	}
	attn, ok := hfAttention[attnName]
	if !ok {
		return t.errorf("attn_implementation", "flash_attention_2, sdpa or eager", "unknown attention %s", quoteKey(attnName))
	}
	release, _, err := hfTransformers(t)
	if err != nil {
		return err
	}
	if o.Model != "" {
		args := []string{str(o.Model), kw("attn", str(attn))}
		if release != "" {
			args = append(args, kw("transformers", str(release)))
		}
		if run.vocabMultiple > 0 {
			args = append(args, kw("vocab_multiple", num(run.vocabMultiple)))
		}
		if run.logitsLoss {
			args = append(args, kw("loss", str("flash_cross_entropy")), kw("forward_upcast", "True"))
			p.set("keep_logits", str("next"))
		}
		p.model = call("hf_config", args...)
	} else if name == "" {
		return t.errorf("model_name_or_path", "pass the model's Hugging Face config.json: --model config.json (TrainingArguments' JSON holds no model), or name it: model_name_or_path=Qwen/Qwen3-8B",
			"the config names no model")
	} else if run.logitsLoss {
		return t.errorf("model_name_or_path", modelHint(o), "the trainer's loss is replayed on hf_config's models: no config.json for %s", quoteKey(name))
	} else if m, ok := hfModels[name]; ok { // their vocabularies are multiples of 32 already (TestZooVocabMultiple): vocabMultiple changes none
		p.load("@stdlib//llm.star", m.fn)
		p.model = call(m.fn, str(m.size), kw("attn", str(attn)))
	} else {
		return t.errorf("model_name_or_path", modelHint(o), "memsh's zoo has no model for %s", quoteKey(name))
	}
	return hfAdapters(t, p, run)
}

func hfAdapters(t *tree, p *plan, run hfRun) error {
	peft, err := t.boolean("use_peft", false)
	if err != nil {
		return err
	}
	in4, err := t.boolean("load_in_4bit", false)
	if err != nil {
		return err
	}
	in8, err := t.boolean("load_in_8bit", false)
	if err != nil {
		return err
	}
	kind, err := t.str("bnb_4bit_quant_type", "nf4")
	if err != nil {
		return err
	}
	nested, err := t.boolean("use_bnb_nested_quant", false)
	if err != nil {
		return err
	}
	switch {
	case in4 && in8:
		return t.errorf("load_in_4bit", "keep one", "and load_in_8bit are both true")
	case in4 && kind != "nf4":
		return t.errorf("bnb_4bit_quant_type", "memsh models nf4", "quant type %s is not modelled", quoteKey(kind))
	case in4 && nested:
		p.set("quant", str("nf4-dq"))
	case in4:
		p.set("quant", str("nf4"))
	case in8:
		p.set("quant", str("int8"))
	}
	if in4 && run.quantStorage != "" {
		p.set("quant_storage", str(run.quantStorage))
	}
	if run.quantExperts {
		p.set("quant_experts", "True")
	}
	rank, err := t.integer("lora_r", 16, 1, 1<<16)
	if err != nil {
		return err
	}
	alpha, err := t.integer("lora_alpha", 32, 1, 1<<20)
	if err != nil {
		return err
	}
	drop, err := t.probability("lora_dropout", 0.05)
	if err != nil {
		return err
	}
	dropout := formatFloat(drop)
	// PEFT's target_modules: a list of names (each a module path or its
	// last parts), or one string, a regular expression over the whole path
	// (target_pattern), "all-linear" aside.
	raw, _ := t.get("lora_target_modules")
	pattern, isPattern := raw.(string)
	isPattern = isPattern && pattern != "all-linear"
	var mods []string
	if !isPattern {
		if mods, err = t.strs("lora_target_modules"); err != nil {
			return err
		}
	}
	if !peft {
		return nil
	}
	targets := []string{"q", "v"} // PEFT's default for the Llama, Mistral and Qwen2 families
	if mods != nil {
		targets = nil
		for _, m := range mods {
			if role, ok := hfLoRA[m]; ok {
				targets = append(targets, role)
			} else {
				targets = append(targets, m) // a module name, as PEFT matches it (lora(targets=) reads names)
			}
		}
	}
	t.notModelledIf("use_dora", "DoRA's magnitude vectors and the weight norm it computes")
	t.notModelledIf("lora_modules_to_save", "modules trained in full beside the adapters")
	args := []string{kw("rank", num(rank)), kw("alpha", num(alpha)), kw("targets", strList(targets)), kw("dropout", dropout)}
	if isPattern {
		args[2] = kw("target_pattern", str(pattern))
	}
	// PEFT's target_parameters (Axolotl's lora_target_parameters): with
	// them alone, target_modules stays empty.
	params, err := t.strs("lora_target_parameters")
	if err != nil {
		return err
	}
	if len(params) > 0 {
		if len(targets) == 0 && !isPattern {
			args = slices.Delete(args, 2, 3)
		}
		args = append(args, kw("target_parameters", strList(params)))
	}
	if run.adaptersInBaseDtype {
		args = append(args, kw("autocast_adapter_dtype", "False"))
	}
	p.set("lora", call("lora", args...))
	return nil
}

// hfSeq is the tokens per row: --seq, else SFTConfig's max_length (or
// max_seq_length, its earlier name): packed rows are that long, padded
// batches at most that long.
func hfSeq(t *tree, o Options) (int64, error) {
	n, err := t.integer("max_length", 0, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	old, err := t.integer("max_seq_length", 0, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	if _, err := t.boolean("packing", false); err != nil {
		return 0, err
	}
	switch {
	case o.Seq > 0:
		return o.Seq, nil
	case n > 0 && old > 0 && n != old:
		return 0, t.errorf("max_seq_length", "keep max_length, its name from TRL 0.20", "%d and max_length %d disagree", old, n)
	case n > 0:
		return n, nil
	case old > 0:
		return old, nil
	}
	return 0, &Error{File: t.file, Key: "max_length", Msg: "missing: TrainingArguments say nothing of the sequence",
		Hint: "the tokens per row: --seq N"}
}

// has says whether the plan sets train(key=).
func (p *plan) has(key string) bool {
	for _, a := range p.train {
		if a.key == key {
			return true
		}
	}
	return false
}

// value is the expression the plan sets train(key=) to; "" when unset.
func (p *plan) value(key string) string {
	for _, a := range p.train {
		if a.key == key {
			return a.expr
		}
	}
	return ""
}

// quantized says whether the plan has quantized base weights under LoRA
// adapters (QLoRA).
func (p *plan) quantized() bool {
	var quant, lora bool
	for _, a := range p.train {
		quant = quant || a.key == "quant"
		lora = lora || a.key == "lora"
	}
	return quant && lora
}
