package importers

import (
	"fmt"
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
	name:  "hf",
	about: "Hugging Face TrainingArguments or TRL SFTConfig (JSON or YAML) with the model's config.json: per-device batch, gradient accumulation, bf16/fp16 and the model's dtype, gradient checkpointing, optim, max_length and packing, LoRA/QLoRA (TRL's ModelConfig), FSDP, the accelerate config it is launched with (accelerate_config=)",
	exts:  []string{".json", ".yaml", ".yml"},
	parse: parseHF,
	detect: func(t *tree) bool {
		_, ok := t.leaves["per_device_train_batch_size"]
		return ok
	},
	plan: hfPlan,
	noEffect: []string{
		"output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "eval_strategy", "evaluation_strategy", "eval_steps",
		"per_device_eval_batch_size", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
		"num_train_epochs", "max_steps", "lr_scheduler_type", "lr_scheduler_kwargs.*", "warmup_ratio", "warmup_steps", "log_level",
		"logging_dir", "logging_strategy", "logging_steps", "logging_first_step", "save_strategy", "save_steps", "save_total_limit",
		"save_only_model", "seed", "data_seed", "report_to", "run_name", "push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo",
		"remove_unused_columns", "dataloader_num_workers", "dataloader_pin_memory", "dataloader_drop_last", "disable_tqdm",
		"load_best_model_at_end", "metric_for_best_model", "label_names", "ddp_timeout", "ddp_find_unused_parameters",
		"gradient_checkpointing_kwargs.preserve_rng_state", "gradient_checkpointing_kwargs.determinism_check",
		"activation_checkpointing_kwargs.preserve_rng_state", "activation_checkpointing_kwargs.determinism_check", "model_revision", "trust_remote_code", "chat_template", "dataset_name", "dataset_config",
		"dataset_train_split", "dataset_test_split", "dataset_mixture.*", "dataset_num_proc", "dataset_text_field", "dataset_kwargs.*",
		"eos_token", "pad_token", "completion_only_loss", "assistant_only_loss", "lora_task_type", "bnb_4bit_quant_storage",
	},
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
	// quantStorage is the float dtype a 4-bit model's codes are stored in
	// (bitsandbytes' bnb_4bit_quant_storage, train(quant_storage=)); ""
	// leaves bitsandbytes' uint8.
	quantStorage string
}

// trlRun is TRL's SFTTrainer, and the plain Trainer.
var trlRun = hfRun{kbitNormsFP32: true, zero3PEFTReentrant: true}

func hfPlan(t *tree, o Options) (*plan, error) { return hfPlanAs(t, o, trlRun) }

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
		p.set("seq", num(seq))
	}
	accum, err := t.integer("gradient_accumulation_steps", 1, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if accum > 1 {
		p.set("grad_accum", num(accum))
	}
	optim, err := t.str("optim", "adamw_torch_fused") // training_args.py's default with torch >= 2.8
	if err != nil {
		return nil, err
	}
	expr, ok := hfOptimizers[optim]
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
	}
	if err := hfCheckpoint(t, p, ds, run); err != nil {
		return nil, err
	}
	// use_liger_kernel: _apply_liger_kernel_to_instance with its defaults
	// (rope, rms_norm, swiglu, fused_linear_cross_entropy); memsh replays
	// the fused loss, the norms and SwiGLU (docs/liger.md), not RoPE.
	if liger, err := t.boolean("use_liger_kernel", false); err != nil {
		return nil, err
	} else if liger {
		p.set("loss_chunks", str("liger"))
		p.set("liger_kernels", "True")
		key := "use_liger_kernel" // or the file's key it was derived from (Axolotl's liger_rope)
		if src, ok := t.from[key]; ok {
			key = src
		}
		t.notModelled = append(t.notModelled, key+": Liger's RoPE kernel (in place on copies of q and k: transients only)")
	}
	if compiled, err := t.boolean("torch_compile", false); err != nil {
		return nil, err
	} else if compiled {
		p.set("compile", "True")
	}
	p.set("gpu", str(o.GPU))
	if ds != nil {
		return p, hfDeepSpeed(t, ds, o, p, batch, accum, expr)
	}
	return p, hfLayout(t, o, p)
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
	if o.Model != "" && release != "" {
		p.model = call("hf_config", str(o.Model), kw("attn", str(attn)), kw("transformers", str(release)))
	} else if o.Model != "" {
		p.model = call("hf_config", str(o.Model), kw("attn", str(attn)))
	} else if m, ok := hfModels[name]; ok {
		p.load("@stdlib//llm.star", m.fn)
		p.model = call(m.fn, str(m.size), kw("attn", str(attn)))
	} else {
		return t.errorf("model_name_or_path", "pass the model's Hugging Face config.json: --model config.json",
			"memsh's zoo has no model for %s", quoteKey(name))
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
	mods, err := t.strs("lora_target_modules")
	if err != nil {
		return err
	}
	if !peft {
		return nil
	}
	targets := []string{"q", "v"} // PEFT's default for the Llama, Mistral and Qwen2 families
	if mods != nil {
		targets = nil
		for _, m := range mods {
			role, ok := hfLoRA[m]
			if !ok {
				return t.errorf("lora_target_modules", "memsh knows q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head and all-linear", "unknown module %s", quoteKey(m))
			}
			targets = append(targets, role)
		}
	}
	t.notModelledIf("use_dora", "DoRA's magnitude vectors and the weight norm it computes")
	t.notModelledIf("lora_modules_to_save", "modules trained in full beside the adapters")
	args := []string{kw("rank", num(rank)), kw("alpha", num(alpha)), kw("targets", strList(targets)), kw("dropout", dropout)}
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

// hfCheckpoint is activation checkpointing as the trainer runs it under
// transformers 5 (hf_config's default release), with the
// torch.utils.checkpoint variant it asks for:
//   - activation_checkpointing and activation_checkpointing_kwargs
//     (transformers 5.23.0 and later), or their deprecated aliases
//     gradient_checkpointing and gradient_checkpointing_kwargs, which
//     TrainingArguments reads when the new names are unset
//     (training_args.py at 5.25.0);
//   - use_reentrant when the kwargs say it;
//   - otherwise non-reentrant: the plain Trainer's
//     activation_checkpointing_enable() asks for {"use_reentrant": False}
//     when no kwargs are given (modeling_utils.py from 5.0.0; 4.x's
//     gradient_checkpointing_enable() asked for True, 4.57.1 l.3691-3692:
//     memsh.transformers=4.x says so, as does
//     gradient_checkpointing_kwargs.use_reentrant=true),
//     and TRL's SFTTrainer, which set it so itself under transformers < 5
//     (trl/trainer/sft_trainer.py at v1.16.0, l.1075-1081); but reentrant
//     for a PEFT model under DeepSpeed ZeRO-3, whatever the config says
//     (l.872-895, trl#2514);
//   - every_n_layers in the kwargs (5.17.0 and later): one layer in n
//     checkpointed, checkpoint(every=n); offload (save_on_cpu around each
//     checkpoint) is not modelled.
//
// A PEFT model's embedding output requires grad (TRL calls
// enable_input_require_grads() with gradient checkpointing, l.898-900;
// transformers 5 does so for every model taking input_ids, which changes
// nothing for a trainable embedding).
func hfCheckpoint(t *tree, p *plan, ds *tree, run hfRun) error {
	name, kwargs := "gradient_checkpointing", "gradient_checkpointing_kwargs"
	if v, ok := t.leaves["activation_checkpointing"]; ok && v.value != nil {
		name = "activation_checkpointing"
	}
	for k := range t.leaves {
		if strings.HasPrefix(k, "activation_checkpointing_kwargs.") {
			kwargs = "activation_checkpointing_kwargs"
		}
	}
	for k := range t.leaves { // the aliases transformers ignores once the new names are set
		if (name != "gradient_checkpointing" && k == "gradient_checkpointing") ||
			(kwargs != "gradient_checkpointing_kwargs" && strings.HasPrefix(k, "gradient_checkpointing_kwargs.")) {
			t.get(k)
		}
	}
	_, set := t.leaves[name]
	sft := false
	for _, k := range []string{"max_length", "max_seq_length", "packing", "dataset_text_field", "use_peft"} {
		if _, ok := t.leaves[k]; ok {
			sft = true
		}
	}
	if sft && !set {
		return &Error{File: t.file, Key: name, Msg: "missing: TRL's SFTConfig and TrainingArguments default it differently",
			Hint: "say it: " + name + "=true (or false)"}
	}
	on, err := t.boolean(name, false)
	if err != nil || !on {
		return err
	}
	peft, err := t.boolean("use_peft", false)
	if err != nil {
		return err
	}
	_, major, err := hfTransformers(t)
	if err != nil {
		return err
	}
	// 4.x's gradient_checkpointing_enable() asks for reentrant; TRL's
	// SFTTrainer asks for non-reentrant itself under 4.x
	reentrant, err := t.boolean(kwargs+".use_reentrant", major == 4 && !sft)
	if err != nil {
		return err
	}
	every, err := t.integer(kwargs+".every_n_layers", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	if every > 1 {
		t.notModelled = append(t.notModelled, fmt.Sprintf("%s.every_n_layers: transformers checkpoints layers 0, %d, %d, ...; "+
			"checkpoint(every=%d) the same number of layers, from layer %d (the count is the same, which layers may differ by one at the ends)",
			kwargs, every, 2*every, every, every-1))
	}
	t.notModelledIf(kwargs+".offload", "the checkpointed layers' inputs held in pinned host memory (save_on_cpu): memsh keeps them on the device")
	if ds != nil && peft && run.zero3PEFTReentrant {
		stage, err := ds.integer("zero_optimization.stage", 0, 0, 3)
		if err != nil {
			return err
		}
		reentrant = reentrant || stage == 3
	}
	if !reentrant && !peft && every == 1 {
		p.set("checkpoint", str("full"))
		return nil
	}
	args := []string{str("full")}
	if every > 1 {
		args = []string{kw("every", num(every))}
	}
	if reentrant {
		args = append(args, kw("reentrant", "True"))
	}
	if peft {
		args = append(args, kw("input_requires_grad", "True"))
	}
	p.set("checkpoint", call("checkpoint", args...))
	return nil
}

// hfLayout is data parallelism over every GPU: DDP, or FSDP with the
// Trainer's fsdp option (full_shard, shard_grad_op, offload).
func hfLayout(t *tree, o Options, p *plan) error {
	v, _ := t.get("fsdp")
	var opts []string
	switch x := v.(type) {
	case nil:
	case string:
		opts = strings.Fields(x)
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return t.errorf("fsdp", "", "want a list of options, got an item %s", describe(e))
			}
			opts = append(opts, s)
		}
	case bool:
		release, major, err := hfTransformers(t)
		if err != nil {
			return err
		}
		if x && major == 4 {
			return t.errorf("fsdp", "full_shard auto_wrap", "say which sharding (fsdp: true is transformers 5's, with memsh.transformers=%s)", release)
		}
		if x { // transformers 5: FSDP on, configured by fsdp_config (training_args.py 5.25.0 l.2903)
			opts = []string{"full_shard", "auto_wrap"}
		}
	default:
		return t.errorf("fsdp", "full_shard auto_wrap", "want options, got %s", describe(v))
	}
	version, err := hfFSDPVersion(t)
	if err != nil {
		return err
	}
	fsdp, offload, keep := false, false, false
	for _, opt := range opts {
		switch opt {
		case "full_shard":
			fsdp = true
		case "shard_grad_op": // parameters kept gathered from the forward to the backward
			fsdp, keep = true, true
		case "offload":
			offload = true
		case "auto_wrap":
		case "hybrid_shard", "hybrid_shard_zero2", "no_shard":
			return t.errorf("fsdp", "memsh replays full_shard and shard_grad_op", "%s is not modelled", quoteKey(opt))
		default:
			return t.errorf("fsdp", "full_shard, shard_grad_op, hybrid_shard, offload, auto_wrap", "unknown option %s", quoteKey(opt))
		}
	}
	if fsdp {
		// fsdp_config's cpu_offload, which the legacy offload option sets
		// (training_args.py 5.25.0 l.2830-2831)
		on, err := t.boolean(hfFSDPKey(t, "cpu_offload"), false)
		if err != nil {
			return err
		}
		offload = offload || on
		if keep, err = hfReshardAfterForward(t, version, keep); err != nil {
			return err
		}
	}
	gpus := o.GPUs * o.Nodes
	if gpus == 1 && !fsdp {
		return nil
	}
	args := []string{kw("dp", num(gpus))}
	if fsdp {
		args = append(args, kw("fsdp", num(version)))
	}
	if keep {
		args = append(args, kw("reshard_after_forward", "False"))
	}
	// accelerate sets FSDP's mixed-precision policy from the Trainer's bf16
	// or fp16: param_dtype and reduce_dtype both that dtype, FSDP1 and
	// FSDP2 alike (AcceleratorState calls fsdp_plugin.set_mixed_precision,
	// accelerate 1.16 state.py l.975-976; utils/dataclasses.py
	// l.2008-2013). memsh's FSDP1 reduces in param_dtype already, and its
	// param_dtype is the autocast dtype; FSDP2's reduce_dtype defaults to
	// the gradients' dtype (torchtitan's fp32), so over fp32 weights the
	// Trainer's is said.
	if fsdp && version == 2 {
		switch p.value("precision") {
		case str("bf16-mixed"):
			args = append(args, kw("reduce_dtype", str("bf16")))
		case str("fp16-mixed"):
			args = append(args, kw("reduce_dtype", str("fp16")))
		}
	}
	// A PEFT model under FSDP is wrapped by peft's fsdp_auto_wrap_policy,
	// every adapter a unit of its own (Trainer._fsdp_qlora_plugin_updates,
	// transformers 4.57.1 trainer.py l.5577-5583); with quantized weights
	// memsh wraps them so already.
	peft, err := t.boolean("use_peft", false)
	if err != nil {
		return err
	}
	if fsdp && version == 1 && peft && !p.quantized() {
		args = append(args, kw("fsdp_adapter_units", "True"))
	}
	if fsdp && version == 1 {
		sync, err := hfSyncModuleStates(t)
		if err != nil {
			return err
		}
		if sync {
			args = append(args, kw("fsdp_sync_module_states", "True"))
		}
	}
	if fsdp {
		mode, err := hfBackwardPrefetch(t)
		if err != nil {
			return err
		}
		if version == 1 { // accelerate drops backward_prefetch for FSDP2, with a warning
			args = append(args, kw("fsdp_backward_prefetch", str(mode)))
		}
		// FSDP1's forward_prefetch: fsdp_config's, false unless set
		// (transformers 5.25.0 training_args.py l.2872-2874); the Trainer
		// passes none for FSDP2, whose plugin leaves it unset.
		forward, err := t.boolean(hfFSDPKey(t, "forward_prefetch"), false)
		if err != nil {
			return err
		}
		if version == 1 && forward {
			args = append(args, kw("fsdp_forward_prefetch", "True"))
		}
	}
	// The Trainer accumulates inside accelerator.no_sync() unless
	// accelerator_config's gradient_accumulation_kwargs sets
	// sync_each_batch (accelerate's GradientAccumulationPlugin): then
	// FSDP1 reduce-scatters every micro-batch.
	each, err := t.boolean("accelerator_config.gradient_accumulation_kwargs.sync_each_batch", false)
	if err != nil {
		return err
	}
	accum, err := t.integer("gradient_accumulation_steps", 1, 1, 1<<24)
	if err != nil {
		return err
	}
	if fsdp && version == 1 && each && accum > 1 {
		if offload {
			// _flat_param.py prepare_gradient_for_backward (pytorch/pytorch
			// fe03cf693c): "Gradient accumulation outside `no_sync()` does
			// not work with CPU offloading" (sim/core/offload.go).
			return t.errorf("accelerator_config.gradient_accumulation_kwargs.sync_each_batch",
				"set it false (the Trainer's no_sync() accumulation), or drop offload from fsdp",
				"FSDP1 with offload (fsdp: ... offload) accumulates gradients inside no_sync() only; PyTorch refuses accumulation outside it with CPU offloading")
		}
		args = append(args, kw("fsdp_sync_each_batch", "True"))
	}
	// FSDP2 under accelerate 1.11.0 and later accumulates without
	// gradient sync unless sync_each_batch: accumulate() calls
	// set_requires_gradient_sync(False) on the micro-batches that do not
	// step (accelerator.py no_sync at v1.14.0, beb0672aa8; ec92b1af7a),
	// parallel(fsdp_no_sync=True). DDP there all-reduces every
	// micro-batch with sync_each_batch; memsh all-reduces once a step, as
	// under no_sync().
	switch {
	case accum <= 1:
	case !fsdp && each:
		t.notModelled = append(t.notModelled, "accelerator_config.gradient_accumulation_kwargs.sync_each_batch: DDP's all-reduce of every micro-batch "+
			"(memsh all-reduces once a step, as under accelerate's no_sync(): the communication time is under-counted)")
	case fsdp && version == 2 && !each && offload:
		t.notModelled = append(t.notModelled, "fsdp_config.fsdp_version: accelerate 1.11.0 and later accumulate FSDP2 gradients unsharded "+
			"(set_requires_gradient_sync(False)); with offload memsh reduce-scatters every micro-batch instead (fsdp_no_sync is not modelled with CPU offload)")
	case fsdp && version == 2 && !each:
		args = append(args, kw("fsdp_no_sync", "True"))
	}
	p.set("parallel", call("parallel", args...))
	if offload {
		p.offload(kw("params", str("cpu")))
	}
	if o.Nodes > 1 {
		p.set("cluster", call("cluster", kw("nodes", num(o.Nodes)), kw("gpus_per_node", num(o.GPUs))))
	}
	return nil
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

// hfSyncModuleStates is FSDP1's sync_module_states as the Trainer passes
// it to accelerate: fsdp_config's sync_module_states, true unless set
// (transformers 5.17 training_args.py l.2837-2839, the "fsdp_" prefix of
// a key dropped first, l.2744), forced on by cpu_ram_efficient_loading
// (accelerate 1.16 utils/dataclasses.py l.1858-1863). FSDP then
// broadcasts rank 0's parameters while it wraps the model
// (parallel(fsdp_sync_module_states=True), replay/fsdp1_wrap.go).
func hfSyncModuleStates(t *tree) (bool, error) {
	sync, err := t.boolean(hfFSDPKey(t, "sync_module_states"), true)
	if err != nil {
		return false, err
	}
	ram, err := t.boolean(hfFSDPKey(t, "cpu_ram_efficient_loading"), false)
	return sync || ram, err
}

// hfFSDPVersion is the FSDP the Trainer asks accelerate for:
// fsdp_config's version (or fsdp_version, its "fsdp_" prefix dropped), 2
// unless set from transformers 5.10.0 (training_args.py 5.10.0 l.2736,
// 5.25.0 l.2826; 5.9.0 l.2812 and earlier 5.x: 1), 1 under transformers
// 4.x (accelerate's FullyShardedDataParallelPlugin default).
func hfFSDPVersion(t *tree) (int64, error) {
	release, major, err := hfTransformers(t)
	if err != nil {
		return 0, err
	}
	def := int64(2)
	if major == 4 || release != "" && !atLeast(release, 5, 10) {
		def = 1
	}
	return t.integer(hfFSDPKey(t, "version"), def, 1, 2)
}

// hfReshardAfterForward says whether FSDP keeps the parameters gathered
// from the forward to the backward: transformers 5's fsdp_config
// reshard_after_forward, for FSDP2 a bool (true unless set), for FSDP1
// the sharding strategy ("full_shard" unless set; "shard_grad_op"
// keeps them), which the legacy fsdp option sets only when the key is
// absent (setdefault, training_args.py 5.25.0 l.2916-2932); legacy says
// the fsdp option was shard_grad_op.
func hfReshardAfterForward(t *tree, version int64, legacy bool) (bool, error) {
	keep, err := hfTrainerReshard(t, version, legacy)
	if err != nil || !keep || version != 1 {
		return keep, err
	}
	// accelerate 1.16 builds FSDP1 with its plugin's sharding_strategy, read
	// from FSDP_SHARDING_STRATEGY (FULL_SHARD unless the launcher exports
	// another), before the Trainer's reshard_after_forward (accelerator.py
	// l.1919: sharding_strategy or reshard_after_forward): under
	// transformers 5, which passes the strategy only as
	// reshard_after_forward, FSDP1 runs FULL_SHARD unless an accelerate
	// config says SHARD_GRAD_OP (accelerate_config=, hf_accelerate.go).
	// Transformers 4.x exports the variable itself (4.57.1
	// training_args.py l.2011-2016).
	key := hfFSDPKey(t, "reshard_after_forward")
	_, major, err := hfTransformers(t)
	if err != nil {
		return false, err
	}
	if major == 4 || strings.HasPrefix(t.from[key], "accelerate_config.") {
		return true, nil
	}
	said := key
	if legacy {
		said = "fsdp"
	}
	t.notModelled = append(t.notModelled, said+": shard_grad_op under FSDP1 changes nothing with transformers 5: accelerate 1.16 runs FSDP_SHARDING_STRATEGY's "+
		"FULL_SHARD (accelerator.py l.1919), which memsh replays; an accelerate config's fsdp_sharding_strategy SHARD_GRAD_OP (accelerate_config=) keeps the parameters gathered")
	return false, nil
}

// hfTrainerReshard is what the Trainer's own keys say of resharding
// (hfReshardAfterForward).
func hfTrainerReshard(t *tree, version int64, legacy bool) (bool, error) {
	key := hfFSDPKey(t, "reshard_after_forward")
	v, _ := t.get(key)
	switch x := v.(type) {
	case nil:
		return legacy, nil
	case bool:
		if version == 1 {
			return false, t.errorf(key, "full_shard or shard_grad_op", "FSDP1's reshard_after_forward is its sharding strategy, got %v", x)
		}
		return !x, nil
	case string:
		switch strings.ToLower(x) {
		case "true", "full_shard", "1":
			return false, nil
		case "false", "shard_grad_op", "2":
			return true, nil
		case "hybrid_shard", "hybrid_shard_zero2", "no_shard":
			return false, t.errorf(key, "full_shard or shard_grad_op", "sharding strategy %s is not modelled", quoteKey(x))
		}
	}
	return false, t.errorf(key, "true or false (FSDP2), full_shard or shard_grad_op (FSDP1)", "want a sharding, got %s", describe(v))
}

// hfFSDPKey is the key the Trainer reads fsdp_config's name from: the key
// itself, else its "fsdp_"-prefixed spelling (the prefix dropped,
// training_args.py l.2744 at transformers 5.17).
func hfFSDPKey(t *tree, name string) string {
	if _, ok := t.get("fsdp_config." + name); ok {
		return "fsdp_config." + name
	}
	return "fsdp_config.fsdp_" + name
}

// hfBackwardPrefetch is FSDP1's backward_prefetch as the Trainer passes it
// to accelerate: fsdp_config's backward_prefetch, "NO_PREFETCH" unless set
// (transformers 4.57.1 training_args.py l.2028-2029, 5.25.0 l.2875),
// which accelerate's FullyShardedDataParallelPlugin turns into
// backward_prefetch=None (accelerate 1.16 utils/dataclasses.py
// l.1767-1777): each unit gathered by its own pre-backward, where
// FullyShardedDataParallel's own default is BACKWARD_PRE
// (parallel(fsdp_backward_prefetch=...), core/fsdp.go).
func hfBackwardPrefetch(t *tree) (string, error) {
	key := hfFSDPKey(t, "backward_prefetch")
	s, err := t.str(key, "NO_PREFETCH")
	if err != nil {
		return "", err
	}
	switch strings.ToUpper(s) {
	case "NO_PREFETCH":
		return "none", nil
	case "BACKWARD_PRE":
		return "pre", nil
	case "BACKWARD_POST":
		return "post", nil
	}
	return "", t.errorf(key, "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH", "unknown backward prefetch %s", quoteKey(s))
}
