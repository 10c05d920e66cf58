package importers

import (
	"fmt"
	"strings"
)

// Megatron-SWIFT's arguments (MegatronArguments at v4.5.2) by what memsh
// does with them: derived as Megatron-LM's flags, MoE settings written as
// parallel() keywords, refused, listed as not modelled, or of no effect.

// megatronSwiftFlag derives Megatron-LM's flag from ms-swift's argument
// src, ms-swift's default def where the script gives none (nil: leave
// Megatron-LM's).
func megatronSwiftFlag(t *tree, flag, src string, def any) {
	v, _ := t.get(src)
	if v == nil {
		v = def
	}
	if v != nil {
		t.derive(flag, v, src)
	}
}

// megatronSwiftRecompute is recompute_granularity (selective by default,
// "none" for none), recompute_method, recompute_num_layers and
// recompute_modules, read by the Megatron reader; ms-swift refuses a
// method with selective recompute (MegatronArguments.__post_init__).
func megatronSwiftRecompute(t *tree, p *plan) error {
	gran, err := t.str("recompute_granularity", "selective")
	if err != nil {
		return err
	}
	method, err := t.str("recompute_method", "")
	if err != nil {
		return err
	}
	if gran == "selective" && method != "" {
		return t.errorf("recompute_method", "ms-swift raises the same: drop it with selective recompute", "recompute method is not supported for selective recompute")
	}
	if gran != "none" {
		t.derive("recompute-granularity", gran, "recompute_granularity")
	}
	megatronSwiftFlag(t, "recompute-method", "recompute_method", nil)
	megatronSwiftFlag(t, "recompute-num-layers", "recompute_num_layers", nil)
	megatronSwiftFlag(t, "recompute-modules", "recompute_modules", nil)
	return megatronRecompute(t, p)
}

// megatronSwiftLayout derives the layout's flags megatronLayout reads,
// under ms-swift's defaults; layers is the model's decoder layers
// (--num-layers, which mcore-bridge takes from config.json).
func megatronSwiftLayout(t *tree, layers int64) error {
	for _, k := range []string{"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "decoder_first_pipeline_num_layers",
		"decoder_last_pipeline_num_layers", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "cp_comm_type",
		"pipeline_model_parallel_layout", "overlap_grad_reduce", "overlap_param_gather", "cross_entropy_fusion_impl", "use_megatron_fsdp",
		"data_parallel_sharding_strategy", "tp_comm_overlap"} {
		megatronSwiftFlag(t, strings.ReplaceAll(k, "_", "-"), k, nil)
	}
	t.derive("num-layers", layers, "model")
	megatronSwiftFlag(t, "global-batch-size", "global_batch_size", int64(16))
	megatronSwiftFlag(t, "use-distributed-optimizer", "use_distributed_optimizer", true)
	megatronSwiftFlag(t, "cross-entropy-loss-fusion", "cross_entropy_loss_fusion", true)
	if vpp, err := t.integer("virtual_pipeline_model_parallel_size", 1, 1, 1<<16); err != nil {
		return err
	} else if vpp > 1 {
		t.derive("num-virtual-stages-per-pipeline-rank", vpp, "virtual_pipeline_model_parallel_size")
	}
	tp, err := t.integer("tensor_model_parallel_size", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	sp, err := t.boolean("sequence_parallel", false)
	if err != nil {
		return err
	}
	t.derive("sequence-parallel", sp && tp > 1, "sequence_parallel") // dropped at tp 1 (MegatronArguments.__post_init__)
	fusion, err := t.boolean("gradient_accumulation_fusion", true)
	if err != nil {
		return err
	}
	t.derive("no-gradient-accumulation-fusion", !fusion, "gradient_accumulation_fusion")
	return nil
}

// megatronSwiftMoE is the experts' layout and kernels as parallel()
// keywords: expert parallelism, the experts' tensor parallelism (1 by
// default), the router's dtype (fp32 by default), the shared expert's
// overlap. On a dense model they are refused past their defaults.
func megatronSwiftMoE(t *tree, moe bool) ([]string, error) {
	ep, err := t.integer("expert_model_parallel_size", 1, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	if !moe {
		if ep > 1 {
			return nil, t.errorf("expert_model_parallel_size", "leave it out: the model has no MoE layer", "%d expert ranks for a dense model", ep)
		}
		for _, k := range megatronSwiftMoEKeys {
			t.get(k) // read by Megatron only for MoE layers
		}
		return nil, nil
	}
	etp, err := t.integer("expert_tensor_parallel_size", 1, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	var args []string
	if ep > 1 {
		args = append(args, kw("ep", num(ep)))
	}
	args = append(args, kw("expert_tp", num(etp)))
	switch dt, err := t.str("moe_router_dtype", "fp32"); {
	case err != nil:
		return nil, err
	case dt == "fp32" || dt == "fp64":
		args = append(args, kw("router_dtype", str(dt)))
	case dt != "none":
		return nil, t.errorf("moe_router_dtype", "none, fp32 or fp64", "unknown dtype %s", quoteKey(dt))
	}
	if on, err := t.boolean("moe_shared_expert_overlap", false); err != nil {
		return nil, err
	} else if on {
		args = append(args, kw("shared_expert_overlap", "True"))
	}
	if on, err := t.boolean("moe_grouped_gemm", true); err != nil {
		return nil, err
	} else if !on {
		return nil, t.errorf("moe_grouped_gemm", "leave it out (true, ms-swift's default): memsh replays TEGroupedMLP", "Megatron's SequentialMLP (an MLP per local expert) is not modelled")
	}
	if d, err := t.str("moe_token_dispatcher_type", "alltoall"); err != nil {
		return nil, err
	} else if d != "alltoall" {
		return nil, t.errorf("moe_token_dispatcher_type", "alltoall (ms-swift's default)", "the %s dispatcher is not modelled", quoteKey(d))
	}
	if on, err := t.boolean("moe_enable_deepep", false); err != nil {
		return nil, err
	} else if on {
		return nil, t.errorf("moe_enable_deepep", "leave it out: memsh replays the alltoall dispatcher", "DeepEP's dispatcher is not modelled")
	}
	if on, err := t.boolean("moe_permute_fusion", false); err != nil {
		return nil, err
	} else if !on {
		// parallel(permute_fusion=False): the unfused permute's host syncs
		// (nn/moe_megatron_sync.go); its own ops are not.
		args = append(args, kw("permute_fusion", "False"))
		t.notModelled = append(t.notModelled, "moe_permute_fusion: false (ms-swift's default): Megatron-Core's unfused permute and unpermute (moe_utils.py) sync with the GPU as replayed (parallel(permute_fusion=False)), but memsh lowers and prices Transformer Engine's fused kernels for them")
	}
	t.notModelledIf("moe_expert_capacity_factor", "token dropping at a capacity factor (memsh routes every token, dropless)")
	t.notModelledIf("moe_pad_expert_input_to_capacity", "each expert's rows padded to its capacity")
	t.notModelledIf("moe_layer_recompute", "the MoE layer checkpointed on its own")
	return args, nil
}

// megatronSwiftMoEKeys are the MoE arguments ms-swift hands Megatron,
// which reads them for MoE layers only.
var megatronSwiftMoEKeys = []string{"expert_tensor_parallel_size", "moe_router_dtype", "moe_shared_expert_overlap", "moe_grouped_gemm",
	"moe_token_dispatcher_type", "moe_enable_deepep", "moe_permute_fusion", "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
	"moe_layer_recompute"}

// megatronSwiftRefused refuses what memsh check does not read of
// Megatron-SWIFT: its LoRA, tasks other than causal LM, optimizers other
// than Adam and SGD, MTP, FP4, multimodal models, frozen parameters.
func megatronSwiftRefused(t *tree) error {
	if kind, err := t.str("tuner_type", "full"); err != nil {
		return err
	} else if kind != "full" {
		return t.errorf("tuner_type", "write the plan in Starlark (hf_config(...), lora(...), precision = \"megatron\"), or train full (ms-swift's default)",
			"Megatron-SWIFT's %s (PEFT's adapters on Megatron's parallel linears) is not read", quoteKey(kind))
	}
	for _, k := range []string{"adapters", "mcore_adapter"} {
		if v, _ := t.get(k); v != nil && fmt.Sprint(v) != "[]" {
			return t.errorf(k, "leave it out: memsh check reads full training", "adapters make ms-swift train LoRA, which memsh check does not read")
		}
	}
	if task, err := t.str("task_type", "causal_lm"); err != nil {
		return err
	} else if task != "causal_lm" {
		return t.errorf("task_type", "memsh replays causal-LM training: leave task_type out", "task_type %s is not modelled (its head and loss differ)", quoteKey(task))
	}
	if opt, err := t.str("optimizer", "adam"); err != nil {
		return err
	} else if opt != "adam" {
		return t.errorf("optimizer", "adam (ms-swift's default): Megatron's FusedAdam", "optimizer %s is not read", quoteKey(opt))
	}
	for _, k := range []string{"mtp_num_layers", "fp4_format"} {
		if v, _ := t.get(k); v != nil {
			return t.errorf(k, "leave it out, or write the plan in Starlark (docs/check.md)", "%s is not read", k)
		}
	}
	for _, k := range []string{"freeze_parameters", "freeze_parameters_regex", "trainable_parameters", "trainable_parameters_regex"} {
		if v, _ := t.get(k); v != nil && fmt.Sprint(v) != "[]" {
			return t.errorf(k, "write the plan in Starlark with train(trainable=...) (docs/check.md)", "frozen parameters are not read")
		}
	}
	if r, err := t.integerOrFloat("freeze_parameters_ratio"); err != nil {
		return err
	} else if r > 0 {
		return t.errorf("freeze_parameters_ratio", "write the plan in Starlark with train(trainable=...) (docs/check.md)", "frozen parameters are not read")
	}
	t.get("optimizer_offload_fraction") // the offloaded share, part of optimizer_cpu_offload's note
	for _, k := range []string{"optimizer_cpu_offload", "use_precision_aware_optimizer"} {
		t.notModelledIf(k, "Megatron's CPU offload and precision-aware optimizer (memsh keeps fp32 master weights and Adam's moments on the GPU)")
	}
	for _, k := range []string{"main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"} {
		if v, _ := t.get(k); v != nil && v != "fp32" {
			t.notModelled = append(t.notModelled, fmt.Sprintf("%s: %v (memsh keeps fp32 master weights and moments; Megatron reads it under use_precision_aware_optimizer)", k, v))
		}
	}
	return nil
}

// megatronSwiftNotes lists the rest of what memsh does not model, and
// names the notes of Megatron-LM's flags by ms-swift's arguments.
func megatronSwiftNotes(t *tree) {
	if on, _ := t.boolean("apply_rope_fusion", false); !on {
		t.notModelled = append(t.notModelled, "apply_rope_fusion: false (ms-swift's default): Megatron's unfused rotary embedding (apply_rotary_pos_emb's torch ops), memsh lowers the fused one")
	}
	for _, k := range []string{"bias_activation_fusion", "bias_dropout_fusion", "masked_softmax_fusion"} {
		if on, _ := t.boolean(k, true); !on {
			t.notModelled = append(t.notModelled, k+": false: Megatron's unfused kernels (memsh lowers its fused ones)")
		}
	}
	t.notModelledIf("rope_scaling", "the rotary embedding's scaling (the same tensors; a longer max_model_len)")
	t.notModelledIf("nccl_comm_warmup", "NCCL's communicators made before the first step")
	t.notModelledIf("optimizer_cuda_graph", "the optimizer step captured as a CUDA graph (its private memory pool)")
	t.notModelledIf("mlp_padding_free", "the MLP run on the rows without their padding")
	t.notModelledIf("microbatch_group_size_per_vp_stage", "the micro-batches grouped per virtual pipeline stage")
	t.notModelledIf("enable_dft_loss", "DFT's loss weights each token's loss by its probability (per-token vectors beside the logits)")
	t.notModelledIf("linear_decoupled_in_proj", "Qwen3-Next's and Qwen3.5's linear-attention input projection split in Megatron's own layout")
	// the sparse-attention and hyper-connection models' Megatron kernels
	// and losses (DeepSeek-V3.2's indexer, DeepSeek-V4's mHC and CSA)
	for _, k := range []string{"dsa_indexer_loss_coeff", "dsa_indexer_use_sparse_loss", "apply_dsa_kernel_fusion", "csa_dense_mode", "use_fused_mhc", "mhc_recompute_layer_num"} {
		t.notModelledIf(k, "Megatron-Core's own sparse-attention or hyper-connection kernels, losses and recompute (memsh replays transformers' modules)")
	}
	t.notModelledIf("megatron_extra_kwargs", "Megatron-LM arguments handed on as they are")
	t.notModelledIf("sequence_packing_scheduler", "the packed rows balanced over the data-parallel ranks")
	for i, n := range t.notModelled {
		key, rest, ok := strings.Cut(n, ": ")
		if src, derived := t.from[key]; ok && derived {
			t.notModelled[i] = src + ": " + rest
		}
	}
}

// megatronSwiftLayers is the model's decoder layers from its config.json
// (num_hidden_layers, a vision-language model's text_config's).
func megatronSwiftLayers(o Options) (int64, error) {
	mt, err := parseJSON(o.Model, o.ModelData)
	if err != nil {
		return 0, err
	}
	for _, k := range []string{"num_hidden_layers", "text_config.num_hidden_layers"} {
		if n, ok := mt.leaves[k].value.(int64); ok && n > 0 {
			return n, nil
		}
	}
	return 0, &Error{File: o.Model, Key: "num_hidden_layers", Msg: "missing: Megatron builds num_layers from it", Hint: "pass the model's own config.json"}
}

// megatronSwiftNoEffect are Megatron-SWIFT's arguments that change
// nothing a memory replay sees: checkpoints, schedules, logging, data
// workers, the optimizer's scalars, the aux losses' coefficients (their
// tensors are [experts] vectors), the collectives' alignment, Megatron's
// initialization; and ms-swift 3.x's names of some (load, save,
// eval_interval, save_interval, num_workers).
var megatronSwiftNoEffect = []string{
	"mcore_model", "mcore_ref_model", "finetune", "perform_initialization", "use_cpu_initialization", "no_save_optim", "no_save_rng",
	"no_load_optim", "no_load_rng", "async_save", "save_total_limit", "save_steps", "save_strategy", "output_dir", "use_persistent_ckpt_worker",
	"dist_ckpt_save_pre_mcore_014", "dist_ckpt_optim_fully_reshardable", "distrib_optim_fully_reshardable_mem_efficient", "save_missing_weights",
	"merge_lora", "bridge_backend", "metric_for_best_model", "greater_is_better", "train_iters", "num_train_epochs", "eval_iters", "eval_steps",
	"lr", "lr_warmup_init", "lr_decay_style", "lr_decay_iters", "lr_warmup_iters", "lr_warmup_fraction", "min_lr", "lr_wsd_decay_style",
	"lr_wsd_decay_iters", "weight_decay", "weight_decay_incr_style", "start_weight_decay", "end_weight_decay", "adam_beta1",
	"adam_beta2", "adam_eps", "sgd_momentum", "manual_gc", "manual_gc_steps", "manual_gc_eval", "logging_steps", "tensorboard_dir",
	"tensorboard_queue_size", "wandb_project", "wandb_exp_name", "dataloader_num_workers", "dataloader_pin_memory", "data_sharding",
	"te_rng_tracker", "data_parallel_random_init", "local_rank", "ddp_timeout", "group_by_length", "moe_aux_loss_coeff", "moe_z_loss_coeff",
	"moe_router_load_balancing_type", "moe_token_drop_policy", "overlap_p2p_comm", "batch_p2p_comm", "align_param_gather", "align_grad_reduce",
	"overlap_param_gather_with_optimizer_step", "attention_softmax_in_fp32", "apply_query_key_layer_scaling", "accumulate_allreduce_grads_in_fp32",
	"cp_partition_mode", "calculate_per_token_loss", "skip_megatron_init", "enable_channel_loss", "language_model_only",
	"freeze_llm", "freeze_vit", "freeze_aligner", "target_modules", "target_regex", "modules_to_save", "lora_rank", "lora_alpha", "lora_dropout",
	"lora_bias", "lora_dtype", "use_rslora", "vit_gradient_checkpointing", "vit_gradient_checkpointing_kwargs", "vit_attn_impl", "vit_lr",
	"aligner_lr", "env.CUDA_DEVICE_MAX_CONNECTIONS", "apply_wd_to_qk_layernorm", "fp8_amax_compute_algo",
	// read only with what is refused: muon's, FP4's, MTP's, the reference
	// model of rlhf, sequence classification's and embeddings' settings
	"muon_momentum", "muon_split_qkv", "muon_use_nesterov", "muon_scale_mode", "muon_fp32_matmul_prec", "muon_coefficient_type",
	"muon_num_ns_steps", "muon_tp_mode", "muon_extra_scale_factor", "muon_scalar_optimizer", "fp4_recipe", "fp4_param_gather",
	"mtp_loss_scaling_factor", "mtp_decoder_input_detach", "mtp_shared_weights", "ref_model", "ref_adapters", "num_labels", "problem_type", "mrl_dims",
	"load", "save", "eval_interval", "save_interval", "num_workers",
}
