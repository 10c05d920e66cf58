package importers

import (
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// swiftPresets are ms-swift's --deepspeed and --fsdp presets, its own
// files (swift_config/README.md names their commit).
//
//go:embed swift_config/*.json
var swiftPresets embed.FS

// swiftPresetDir is where ms-swift keeps them (swift/config), the name
// memsh gives a preset in its messages.
const swiftPresetDir = "swift/config/"

// swiftData is the rows: --max_length (or --seq), --packing and
// --padding_free (one row of the batch's rows laid end to end), and the
// attention kernel they need.
func swiftData(t *tree, o Options) error {
	n, err := t.integer("max_length", 0, 1, 1<<24)
	if err != nil {
		return err
	}
	fromModel := false
	if n == 0 && o.Seq == 0 {
		if n, err = swiftMaxModelLen(o); err != nil {
			return err
		}
		if n == 0 {
			return &Error{File: t.file, Key: "max_length", Msg: "missing: ms-swift then cuts rows at the model's max_model_len, read from its config.json, which memsh does not have",
				Hint: "give the script's --max_length 2048, the tokens per row: --seq N, or the model's config.json: --model config.json"}
		}
		fromModel = true
	}
	if n == 0 {
		n = o.Seq
	}
	packing, err := t.boolean("packing", false)
	if err != nil {
		return err
	}
	free, err := t.boolean("padding_free", false)
	if err != nil {
		return err
	}
	attn, err := t.str("attn_impl", "")
	if err != nil {
		return err
	}
	impl, ok := map[string]string{"": "sdpa", "sdpa": "sdpa", "eager": "eager", "flash_attn": "flash_attention_2", "flash_attention_2": "flash_attention_2"}[attn]
	if !ok {
		return t.errorf("attn_impl", "flash_attn, sdpa or eager", "attention %s is not modelled", quoteKey(attn))
	}
	if (packing || free) && impl != "flash_attention_2" {
		feature := "packing"
		if !packing {
			feature = "padding_free"
		}
		return t.errorf(feature, "ms-swift raises the same: add --attn_impl flash_attn", "needs a flash attention implementation (sft_args.py _check_padding_free)")
	}
	if packing { // a packed row is packing_length tokens, max_length unless given (BaseArguments.__post_init__)
		if n, err = t.integer("packing_length", n, 1, 1<<24); err != nil {
			return err
		}
	}
	t.derive("max_length", n, "max_length")
	t.derive("attn_implementation", impl, "attn_impl")
	if fromModel {
		t.notModelled = append(t.notModelled, fmt.Sprintf("max_length: unset, so ms-swift cuts rows at the model's max_model_len, %d (its config.json: BaseArguments.__post_init__, get_max_model_len)", n))
	}
	if !packing && !free && o.Seq == 0 {
		t.notModelled = append(t.notModelled, fmt.Sprintf("max_length: unpacked rows are padded to the batch's longest, at most %d tokens: memsh replays rows of %d (--seq N for another length)", n, n))
	}
	if sp, err := t.integer("sequence_parallel_size", 1, 1, 1<<16); err != nil {
		return err
	} else if sp > 1 {
		return t.errorf("sequence_parallel_size", "leave it out, or write the plan in Starlark with parallel(cp = ...)", "ms-swift's sequence parallelism (Ulysses or ring attention over %d GPUs) is not modelled", sp)
	}
	for _, k := range []string{"max_pixels", "env.MAX_PIXELS", "env.MIN_PIXELS", "env.VIDEO_MAX_PIXELS", "env.FPS_MAX_FRAMES", "env.IMAGE_MAX_TOKEN_NUM", "env.VIDEO_MAX_TOKEN_NUM"} {
		if v, _ := t.get(k); v != nil {
			t.notModelled = append(t.notModelled, fmt.Sprintf("%s: %v: a multimodal model's image or video sizes, which decide its vision tokens: memsh replays text rows of max_length", k, v))
		}
	}
	return nil
}

// swiftDeepSpeed is --deepspeed: one of ms-swift's presets (zero0 ...
// zero3_offload), a JSON file, or inline JSON (json_parse_to_dict), set
// as the key the hf importer reads, with o.ReadFile serving the presets
// and the inline text; and --zero_hpz_partition_size (ZeRO++'s
// hierarchical partition) and --deepspeed_autotp_size (AutoTP). It says
// whether DeepSpeed runs.
func swiftDeepSpeed(t *tree, o *Options) (bool, error) {
	v, _ := t.get("deepspeed")
	if v == nil {
		for _, k := range []string{"zero_hpz_partition_size", "deepspeed_autotp_size"} {
			if x, _ := t.get(k); x != nil {
				return false, t.errorf(k, "ms-swift asserts it: add --deepspeed zero3 (or zero2)", "needs --deepspeed")
			}
		}
		return false, nil
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return false, t.errorf("deepspeed", "zero2, zero3, zero3_offload, or a DeepSpeed config's path", "want a preset or a path, got %s", describe(v))
	}
	read := o.ReadFile
	switch {
	case strings.HasPrefix(strings.TrimSpace(s), "{"):
		name := "deepspeed (inline JSON)"
		t.derive("deepspeed", name, "deepspeed")
		o.ReadFile = func(n string) ([]byte, error) {
			if n == name {
				return []byte(s), nil
			}
			return read(n)
		}
	case swiftIsPreset(s, "zero0", "zero1", "zero2", "zero3", "zero2_offload", "zero3_offload"):
		name := swiftPresetDir + s + ".json"
		t.derive("deepspeed", name, "deepspeed")
		o.ReadFile = func(n string) ([]byte, error) {
			if n == name {
				return swiftPresets.ReadFile("swift_config/" + s + ".json")
			}
			return read(n)
		}
	}
	if hpz, err := t.integer("zero_hpz_partition_size", 0, 1, 1<<16); err != nil {
		return false, err
	} else if hpz > 1 { // ms-swift writes it into the config's zero_optimization (_init_deepspeed)
		t.notModelled = append(t.notModelled, fmt.Sprintf("zero_hpz_partition_size: %d: ZeRO++'s secondary copy of the weights sharded within %d GPUs (hpZ), not replayed", hpz, hpz))
	}
	if v, _ := t.get("deepspeed_autotp_size"); v != nil {
		return false, t.errorf("deepspeed_autotp_size", "leave it out, or write the plan in Starlark with parallel(tp = ...)", "DeepSpeed's AutoTP tensor parallelism is not modelled")
	}
	return true, nil
}

// swiftIsPreset says whether s names one of ms-swift's presets.
func swiftIsPreset(s string, names ...string) bool {
	for _, n := range names {
		if s == n {
			return true
		}
	}
	return false
}

// swiftBatch is TrainArgumentsMixin's batch: per_device_train_batch_size
// 1, and gradient_accumulation_steps ceil(16 / batch / world size) when
// unset (swift/trainers/arguments.py __post_init__).
func swiftBatch(t *tree, world int64) error {
	batch, err := t.integer("per_device_train_batch_size", 1, 1, 1<<24)
	if err != nil {
		return err
	}
	swiftDefault(t, "per_device_train_batch_size", batch)
	if v, _ := t.get("gradient_accumulation_steps"); v == nil {
		swiftDefault(t, "gradient_accumulation_steps", max(1, (16+batch*world-1)/(batch*world)))
	}
	return nil
}

// swiftDefault sets key to ms-swift's default v where the command line
// gives none (or null), as its dataclass does before the Trainer reads it.
func swiftDefault(t *tree, key string, v any) {
	if l, ok := t.leaves[key]; !ok || l.value == nil {
		l.value = v
		t.leaves[key] = l
	}
}

// swiftCheckpoint is gradient checkpointing (on by default), reentrant
// as ms-swift asks unless gradient_checkpointing_kwargs say
// (_fix_gradient_checkpointing: non-reentrant under DDP over several
// processes, reentrant on one process and under DeepSpeed or FSDP).
// It says whether checkpointing is on.
func swiftCheckpoint(t *tree, world int64, sharded bool) (bool, error) {
	on, err := t.boolean("gradient_checkpointing", true)
	if err != nil {
		return false, err
	}
	swiftDefault(t, "gradient_checkpointing", on)
	const kwargs = "gradient_checkpointing_kwargs"
	if v, _ := t.get(kwargs); v != nil {
		s, ok := v.(string)
		var m map[string]any
		if !ok || json.Unmarshal([]byte(s), &m) != nil {
			return false, t.errorf(kwargs, `a JSON object: '{"use_reentrant": false}'`, "want a JSON object, got %s", describe(v))
		}
		for k, x := range m {
			if f, isNum := x.(float64); isNum && f == float64(int64(f)) {
				x = int64(f)
			}
			t.derive(kwargs+"."+k, x, kwargs)
		}
	}
	if _, set := t.leaves[kwargs+".use_reentrant"]; !set {
		t.derive(kwargs+".use_reentrant", !(world > 1 && !sharded), "gradient_checkpointing")
	}
	return on, nil
}

// swiftRefused refuses what ms-swift runs that memsh does not replay,
// naming it: its own optimizers and tuners beside LoRA, LISA, GaLore.
func swiftRefused(t *tree) error {
	if opt, err := t.str("optimizer", ""); err != nil {
		return err
	} else if opt != "" {
		return t.errorf("optimizer", "leave it out: the Trainer's --optim (adamw_torch_fused, ...) is modelled", "ms-swift's optimizer plugin %s is not modelled", quoteKey(opt))
	}
	for _, k := range []string{"use_galore", "lorap_lr_ratio"} {
		if v, _ := t.get(k); v != nil && v != false {
			return t.errorf(k, "leave it out, or write the plan in Starlark", "%s is not modelled", k)
		}
	}
	if n, err := t.integer("lisa_activated_layers", 0, 0, 1<<16); err != nil {
		return err
	} else if n > 0 {
		return t.errorf("lisa_activated_layers", "leave it out, or write the plan in Starlark", "LISA (%d layers trained at a time) is not modelled", n)
	}
	t.notModelledIf("rope_scaling", "the rotary embedding's scaling (the same tensors; a longer max_model_len)")
	t.notModelledIf("neftune_noise_alpha", "NEFTune's noise added to the embeddings' output (a [batch, seq, hidden] transient)")
	t.notModelledIf("enable_dft_loss", "DFT's loss weights each token's loss by its probability (per-token vectors beside the logits)")
	t.notModelledIf("router_aux_loss_coef", "a MoE model's load-balancing loss over the router logits it returns (output_router_logits)")
	t.get("use_logits_to_keep") // read by ms-swift's DPO, KTO and GKD trainers only (mixin.py get_use_logits_to_keep): swift sft and pt run the whole logits
	return nil
}

// swiftNoEffect are ms-swift's arguments (and the variables its launcher
// reads) that change nothing a memory replay sees: data, templates,
// logging, saving, hub access, generation at evaluation, the ports of the
// rendezvous.
var swiftNoEffect = []string{
	"dataset", "val_dataset", "cached_dataset", "cached_val_dataset", "split_dataset_ratio", "dataset_num_proc", "load_from_cache_file",
	"dataset_shuffle", "val_dataset_shuffle", "streaming", "interleave_prob", "stopping_strategy", "shuffle_buffer_size", "download_mode",
	"columns", "strict", "model_name", "model_author", "custom_dataset_info", "system", "template", "template_backend", "truncation_strategy",
	"agent_template", "norm_bbox", "use_chat_template", "padding_side", "loss_scale", "response_prefix", "enable_thinking", "preserve_thinking",
	"add_non_thinking_prefix", "disable_ignore_empty_think", "model_type", "model_revision", "use_hf", "hub_token", "external_plugins",
	"custom_register_path", "seed", "add_version", "create_checkpoint_symlink", "load_args", "load_data_args", "lazy_tokenize",
	"max_new_tokens", "temperature", "top_k", "top_p", "repetition_penalty", "num_beams", "stream", "stop_words", "logprobs",
	"eval_strategy", "eval_steps", "eval_limit", "eval_use_evalscope", "eval_dataset", "eval_datasets", "eval_metric",
	"predict_with_generate", "save_only_model", "save_safetensors", "max_shard_size", "safe_serialization", "acc_strategy",
	"train_dataloader_shuffle", "dataloader_persistent_workers", "dataloader_prefetch_factor", "ddp_backend", "ignore_args_error",
	"early_stop_interval", "callbacks", "check_model", "resume_only_model", "use_flash_ckpt", "max_epochs", "packing_num_proc",
	"packing_strategy", "new_special_tokens", "swanlab_token", "swanlab_project", "swanlab_workspace", "swanlab_exp_name",
	"swanlab_mode", "swanlab_notification_method", "swanlab_webhook_url", "swanlab_secret", "report_to",
	"launcher.master_port", "launcher.master_addr", "launcher.node_rank", "launcher.rdzv_id", "launcher.rdzv_backend", "launcher.rdzv_endpoint",
	"env.MASTER_ADDR", "env.MASTER_PORT", "env.NODE_RANK", "env.OMP_NUM_THREADS", "env.USE_HF", "env.HF_ENDPOINT", "env.WANDB_API_KEY",
	"env.WANDB_PROJECT", "env.MODELSCOPE_CACHE", "env.HF_HOME", "env.SWANLAB_API_KEY", "env.SYSTEM_PROMPT", "env.NCCL_DEBUG",
	// where Python, the hubs and the loggers look, and their tokens
	"env.PYTHONPATH", "env.TOKENIZERS_PARALLELISM", "env.WANDB_MODE", "env.HF_HUB_OFFLINE", "env.HF_DATASETS_OFFLINE",
	"env.TRANSFORMERS_OFFLINE", "env.HF_TOKEN", "env.MODELSCOPE_API_TOKEN", "env.HF_HUB_CACHE",
}

// swiftFSDP is --fsdp: ms-swift's fsdp2 preset (swift_config/fsdp2.json),
// a JSON file or inline JSON, whose "fsdp" options (full_shard auto_wrap
// unless given) and "fsdp_config" become the Trainer's (sft_args.py
// _init_fsdp), fsdp_version 2 unless the config says. Its
// activation_checkpointing (the preset's) turns gradient checkpointing
// off (_check_fsdp2_compatibility) for accelerate's checkpoint wrapper
// around each wrapped layer: non-reentrant, as Axolotl's reader reads the
// same key (axolotl_fsdp.go). It says whether FSDP runs.
func swiftFSDP(t *tree, o Options) (bool, error) {
	v, _ := t.get("fsdp")
	if v == nil || v == "" {
		return false, nil
	}
	s, ok := v.(string)
	if !ok {
		return false, t.errorf("fsdp", "fsdp2, or an FSDP config's path", "want a preset or a path, got %s", describe(v))
	}
	var data []byte
	var err error
	switch {
	case s == "fsdp2":
		data, err = swiftPresets.ReadFile("swift_config/fsdp2.json")
	case strings.HasPrefix(strings.TrimSpace(s), "{"):
		data = []byte(s)
	case o.ReadFile == nil:
		return false, t.errorf("fsdp", "--fsdp fsdp2, ms-swift's preset", "no file can be read here")
	default:
		data, err = o.ReadFile(s)
	}
	if err != nil {
		return false, t.errorf("fsdp", "the path is read from the script's folder", "cannot read the FSDP config: %v", err)
	}
	var cfg struct {
		FSDP   *string        `json:"fsdp"`
		Config map[string]any `json:"fsdp_config"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return false, t.errorf("fsdp", `a JSON object with "fsdp" and "fsdp_config"`, "cannot read the FSDP config: %v", err)
	}
	opts := "full_shard auto_wrap"
	if cfg.FSDP != nil {
		opts = *cfg.FSDP
	}
	t.derive("fsdp", opts, "fsdp")
	if _, ok := cfg.Config["fsdp_version"]; !ok {
		if _, ok := cfg.Config["version"]; !ok {
			t.derive("fsdp_config.fsdp_version", int64(2), "fsdp")
		}
	}
	for k, x := range cfg.Config {
		if f, isNum := x.(float64); isNum && f == float64(int64(f)) {
			x = int64(f)
		}
		if k == "activation_checkpointing" || k == "fsdp_activation_checkpointing" {
			if on, _ := x.(bool); on {
				t.derive("gradient_checkpointing", true, "fsdp")
				t.derive("gradient_checkpointing_kwargs.use_reentrant", false, "fsdp")
			}
			continue
		}
		// a key of the file's own: listed as not understood unless the
		// Trainer's reading of fsdp_config reads it
		t.leaves["fsdp_config."+k] = leaf{value: x, line: t.leaves["fsdp"].line}
	}
	// what happens outside the step: the checkpoints' format, the weights
	// loaded on rank 0 and broadcast at setup
	for _, k := range []string{"state_dict_type", "cpu_ram_efficient_loading"} {
		t.get(hfFSDPKey(t, k))
	}
	// a unit a decoder layer (model._no_split_modules), as memsh wraps
	if w, err := t.str(hfFSDPKey(t, "auto_wrap_policy"), "TRANSFORMER_BASED_WRAP"); err != nil {
		return false, err
	} else if w != "TRANSFORMER_BASED_WRAP" {
		t.notModelled = append(t.notModelled, hfFSDPKey(t, "auto_wrap_policy")+": "+w+": units other than one a decoder layer")
	}
	return true, nil
}

// swiftRLHF refuses `swift rlhf`, by its --rlhf_type (dpo unless given:
// RLHFArguments), naming what ms-swift runs that memsh's dpo(), kto() and
// grpo() do not: its DPO and KTO trainers' own concatenated_forward
// (swift/rlhf_trainers/dpo_trainer.py, kto_trainer.py at v4.5.2) computes
// the logits of the positions from the batch's first label on only
// (use_logits_to_keep, on by default for a text model:
// mixin.py get_use_logits_to_keep, prepare_logits_to_keep) and frees the
// policy's before the reference forward, where dpo() and kto() replay
// TRL's, LLaMA-Factory's or torchtune's; its GRPO trainer is its own
// (rollout, vLLM colocated or served, its loss), not TRL's GRPOTrainer.
func swiftRLHF(t *tree) error {
	kind, err := t.str("rlhf_type", "dpo")
	if err != nil {
		return err
	}
	const hint = "write the plan in Starlark with preference = dpo(...), kto(...) or grpo(...) as the nearest trainer memsh replays (docs/dpo.md, kto.md, grpo.md)"
	switch kind {
	case "dpo", "kto":
		return t.errorf("rlhf_type", hint, "ms-swift's %s trainer is not modelled: its concatenated_forward computes the logits of the completion positions only (use_logits_to_keep) and frees the policy's before the reference forward, which dpo() and kto() do not replay", strings.ToUpper(kind))
	case "grpo":
		return t.errorf("rlhf_type", hint, "ms-swift's GRPO trainer (its own rollout, vLLM engine and loss, swift/rlhf_trainers/grpo_trainer.py) is not modelled")
	}
	return t.errorf("rlhf_type", hint, "rlhf_type %s is not modelled (memsh replays DPO, KTO and GRPO as TRL, LLaMA-Factory and torchtune run them)", quoteKey(kind))
}

// swiftMaxModelLenKeys are the config.json keys ms-swift takes the
// model's longest row from, the least of those present
// (HfConfigFactory.get_max_model_len, swift/model/utils.py at v4.5.2).
var swiftMaxModelLenKeys = []string{"seq_length", "max_position_embeddings", "n_positions", "model_max_length", "seq_len", "max_seq_len", "max_sequence_length", "max_seq_length"}

// swiftMaxModelLen is the model's max_model_len from its config.json (0
// without one, or when it names none): the keys at its top level or in a
// sub-config (text_config, llm_config), as get_config_attr looks.
func swiftMaxModelLen(o Options) (int64, error) {
	if o.ModelData == nil {
		return 0, nil
	}
	mt, err := parseJSON(o.Model, o.ModelData)
	if err != nil {
		return 0, err
	}
	least := int64(0)
	for k, l := range mt.leaves {
		name := k[strings.LastIndexByte(k, '.')+1:]
		if strings.Count(k, ".") > 1 || !slices.Contains(swiftMaxModelLenKeys, name) {
			continue
		}
		if n, ok := l.value.(int64); ok && n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	return least, nil
}
