package importers

import "fmt"

// axolotlRefused are Axolotl's options memsh does not replay, each a
// config error when set (to anything but null, false or 0), with why
// (schemas/config.py, schemas/peft.py, schemas/training.py at axolotl
// 067b021c8).
var axolotlRefused = []struct{ key, what string }{
	{"reward_model", "a reward model trains a classification head on pairs"},
	{"process_reward_model", "a process reward model trains a token-classification head"},
	{"unsloth_cross_entropy_loss", "Unsloth's kernels"}, {"unsloth_lora_mlp", "Unsloth's kernels"}, {"unsloth_lora_qkv", "Unsloth's kernels"},
	{"unsloth_lora_o", "Unsloth's kernels"}, {"unsloth_rms_norm", "Unsloth's kernels"}, {"unsloth_rope", "Unsloth's kernels"},
	{"relora", "ReLoRA's restarts"},
	{"lisa_n_layers", "LISA trains a few layers at a time"},
	{"peft_layers_to_transform", "LoRA on some layers only"},
	{"layer_offloading", "the layers' weights offloaded to the CPU"},
	{"selective_checkpointing", "selective activation checkpointing (ops saved inside a checkpointed layer)"},
	{"tensor_parallel_size", "tensor parallelism"},
	{"context_parallel_size", "context parallelism (ring attention)"},
	{"sequence_parallel_degree", "sequence parallelism (ring attention)"},
	{"gptq", "a GPTQ-quantized base"},
	{"model_quantization_config", "an Mxfp4 or FP8 quantized base"},
	{"fp8", "FP8 training (torchao)"},
	{"fp32_norms", "the norms kept in fp32"},
	{"embeddings_skip_upcast", "embed_tokens and lm_head left out of the dtype casts"},
	{"lora_on_cpu", "the adapters kept on the CPU"},
	{"flash_attn_cross_entropy", "flash-attention's cross-entropy kernel"},
	{"flash_attn_rms_norm", "flash-attention's RMSNorm kernel"},
	{"flash_attn_fuse_mlp", "flash-attention's fused MLP"},
	{"flash_optimum", "BetterTransformer"},
	{"experts_implementation", "another MoE experts kernel"},
	{"use_kernels", "Hub kernels replacing the model's layers"},
	{"use_scattermoe", "ScatterMoE's experts"}, {"use_sonicmoe", "SonicMoE's experts"},
	{"reinit_weights", "a model built from its config, not loaded"},
	{"gpu_memory_limit", "the model spread over the GPUs and the CPU (max_memory)"},
	{"max_memory", "the model spread over the GPUs and the CPU"},
	{"is_multimodal", "a multimodal model"},
	{"use_ray", "Ray's workers"},
}

// axolotlNotAxolotl are TrainingArguments' and TRL's keys, which Axolotl
// does not read: it writes them from its own (core/builders/base.py).
var axolotlNotAxolotl = map[string]string{
	"per_device_train_batch_size": "micro_batch_size", "max_length": "sequence_len", "max_seq_length": "sequence_len",
	"packing": "sample_packing", "optim": "optimizer", "use_peft": "adapter", "torch_dtype": "bf16, fp16, bfloat16 or float16",
	"dtype": "bf16, fp16, bfloat16 or float16", "use_bnb_nested_quant": "adapter: qlora (double quantization)",
	"bnb_4bit_quant_type": "bnb_config_kwargs.bnb_4bit_quant_type", "model_name_or_path": "base_model",
	"activation_checkpointing": "gradient_checkpointing", "use_liger_kernel": "plugins (axolotl.integrations.liger.LigerPlugin)", "use_dora": "peft_use_dora",
	"lora_target_linear_modules": "lora_target_linear", "num_train_epochs": "num_epochs",
}

// axolotlRefuse refuses what memsh does not replay of an Axolotl config.
func axolotlRefuse(t *tree) error {
	for _, r := range axolotlRefused {
		for _, k := range t.keys() {
			l := t.leaves[k]
			if k != r.key && (len(k) <= len(r.key) || k[:len(r.key)+1] != r.key+".") {
				continue
			}
			t.used[k] = true
			here := ", here " + describe(l.value)
			switch x := l.value.(type) {
			case nil:
				continue
			case bool:
				if !x {
					continue
				}
				here = ""
			case int64:
				if x == 0 || (x == 1 && (r.key == "tensor_parallel_size" || r.key == "context_parallel_size" || r.key == "sequence_parallel_degree")) {
					continue
				}
			case []any:
				if len(x) == 0 {
					continue
				}
				here = ", here " + describe(x[0])
			}
			return t.errorf(k, "leave it out, or write the plan in Starlark (hf_config(\"config.json\"), train(...): docs/check.md)", "not modelled: %s%s", r.what, here)
		}
	}
	for k, axo := range axolotlNotAxolotl {
		if _, ok := t.leaves[k]; ok {
			return t.errorf(k, fmt.Sprintf("Axolotl sets it from %s", axo), "is a TrainingArguments key, which Axolotl does not read")
		}
	}
	return nil
}

// axolotlNoEffect are Axolotl's keys that change nothing memsh replays:
// data, prompts and tokenizer, evaluation, logging and saving, learning
// rates and schedules, seeds, and keys whose only effect memsh reads
// elsewhere (tf32: the matmuls' precision; base_model_config: the config
// --model gives; batch_size, which gradient_accumulation_steps' default
// overrides, utils/config/__init__.py l.202-207).
var axolotlNoEffect = []string{
	"datasets", "datasets.*", "test_datasets", "test_datasets.*", "dataset_prepared_path", "dataset_processes", "dataset_num_proc",
	"dataset_exact_deduplication", "dataset_keep_in_memory", "shuffle_merged_datasets", "shuffle_before_merging_datasets",
	"val_set_size", "chat_template", "chat_template_jinja", "default_system_message", "train_on_inputs", "group_by_length",
	"excess_length_strategy", "min_sample_len", "sample_packing_group_size", "sample_packing_bin_size", "sample_packing_sequentially",
	"sample_packing_mp_start_method", "sample_packing_eff_est", "eval_sample_packing", "curriculum_sampling", "skip_prepare_dataset",
	"eval_sequence_len", "eval_batch_size", "eval_steps", "evals_per_epoch", "eval_strategy", "eval_table_size",
	"eval_max_new_tokens", "eval_causal_lm_metrics", "do_causal_lm_eval", "early_stopping_patience",
	"output_dir", "save_steps", "saves_per_epoch", "save_strategy", "save_total_limit", "save_only_model", "save_first_step",
	"save_safetensors", "resume_from_checkpoint", "auto_resume_from_checkpoints", "hub_model_id", "hub_strategy", "hub_revision",
	"push_dataset_to_hub", "hf_use_auth_token", "logging_steps", "include_tokens_per_second", "include_tkps",
	"wandb_project", "wandb_entity", "wandb_watch", "wandb_name", "wandb_run_id", "wandb_log_model", "wandb_mode",
	"mlflow_tracking_uri", "mlflow_experiment_name", "mlflow_run_name", "use_tensorboard", "use_wandb", "use_mlflow",
	"num_epochs", "max_steps", "learning_rate", "lr_scheduler", "lr_scheduler_kwargs", "lr_scheduler_kwargs.*", "cosine_min_lr_ratio",
	"cosine_constant_lr_ratio", "lr_quadratic_warmup", "warmup_steps", "warmup_ratio", "weight_decay",
	"adam_beta1", "adam_beta2", "adam_beta3", "adam_epsilon", "adam_epsilon2", "optim_args", "optim_args.*", "loraplus_lr_ratio",
	"loraplus_lr_embedding", "embedding_lr", "embedding_lr_scale", "seed", "tf32", "strict", "debug", "loss_watchdog_threshold",
	"loss_watchdog_patience", "tokenizer_type", "tokenizer_config", "tokenizer_use_fast", "tokenizer_legacy",
	"tokenizer_use_mistral_common", "tokenizer_save_jinja_files", "base_model_config", "revision_of_model", "trust_remote_code",
	"batch_size", "ddp_timeout", "ddp_bucket_cap_mb", "ddp_broadcast_buffers", "ddp_find_unused_parameters",
	"dataloader_num_workers", "dataloader_pin_memory", "dataloader_prefetch_factor", "dataloader_drop_last",
	"gradient_checkpointing_kwargs.preserve_rng_state", "gradient_checkpointing_kwargs.determinism_check",
	"bnb_config_kwargs.llm_int8_has_fp16_weight", "bnb_config_kwargs.bnb_4bit_quant_storage",
	"torch_compile_backend", "torch_compile_mode", "merge_lora", "merge_method", "low_cpu_mem_usage",
	"rl_beta", "dpo_loss_type", "dpo_loss_weights", "dpo_label_smoothing", // DPO's loss arithmetic on [batch] tensors
	"kto_desirable_weight", "kto_undesirable_weight", // KTO's loss arithmetic on [rows] tensors
	"use_swanlab", "swanlab_project", "swanlab_experiment_name", "swanlab_description", "swanlab_mode", "swanlab_workspace", // SwanLab's logger
	"swanlab_api_key", "swanlab_log_model", "swanlab_web_host", "swanlab_api_host", "swanlab_lark_webhook_url", "swanlab_lark_secret",
	"swanlab_log_completions", "swanlab_completion_log_interval", "swanlab_completion_max_buffer",
	"remove_unused_columns", "eot_tokens", // the Trainer's dataset columns, the tokenizer's end-of-turn tokens (label masking)
	"peft.loftq_config.loftq_bits", // LoftQ's initialisation of the adapters: the base weights stay in the model's dtype
}
