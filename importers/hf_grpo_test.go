package importers

import "testing"

// TestHFGRPO: a TRL GRPOConfig is read as TRL's GRPOTrainer once
// memsh.trainer=grpo says so, with --seq (no key says a row's length):
// max_completion_length (512), beta, use_vllm with vllm_mode (colocate),
// vllm_gpu_memory_utilization (0.3) and vllm_enable_sleep_mode; without
// vLLM steps_per_generation and ds3_gather_for_generation (generate's,
// replayed; or generation_batch_size, every process's prompts);
// GRPOConfig's
// own defaults where the file is silent (gradient_checkpointing on, bf16
// unless fp16: grpo_config.py at 1.16.0).
func TestHFGRPO(t *testing.T) {
	const grpo = `{"per_device_train_batch_size": 8, "model_name_or_path": "meta-llama/Meta-Llama-3-8B", "num_generations": 8, ` +
		`"learning_rate": 1e-6, "memsh.trainer": "grpo"`
	seq := Options{Seq: 1536}
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"defaults", grpo + `}`, []string{`preference = grpo(completion = 512)`, "batch = 8,", "seq = 1536,", `precision = "bf16"`, `checkpoint = "full"`}, []string{"loss_chunks", "vllm"}},
		{"fp16", grpo + `, "fp16": true, "torch_dtype": "float32"}`, []string{`precision = "fp16-mixed"`}, []string{`precision = "bf16"`}},
		{"no checkpointing", grpo + `, "gradient_checkpointing": false}`, []string{`preference = grpo(completion = 512)`}, []string{"checkpoint ="}},
		{"beta and completion", grpo + `, "beta": 0.04, "max_completion_length": 1024}`, []string{`preference = grpo(completion = 1024, beta = 0.04)`}, nil},
		{"colocate", grpo + `, "use_vllm": true}`, []string{`preference = grpo(completion = 512, vllm = "colocate", vllm_memory = 0.3)`}, nil},
		{"colocate asleep", grpo + `, "use_vllm": true, "vllm_gpu_memory_utilization": 0.5, "vllm_enable_sleep_mode": true}`,
			[]string{`preference = grpo(completion = 512, vllm = "colocate", vllm_memory = 0.5, sleep = True)`}, nil},
		{"server", grpo + `, "use_vllm": true, "vllm_mode": "server", "vllm_gpu_memory_utilization": 0.9}`, []string{`preference = grpo(completion = 512, vllm = "server")`}, []string{"vllm_memory"}},
		{"peft", grpo + `, "use_peft": true, "lora_r": 16, "beta": 0.1}`, []string{`preference = grpo(completion = 512, beta = 0.1)`, "lora = lora(rank = 16"}, nil},
		{"trl 1.16", grpo + `, "memsh.trl": "1.16.0"}`, []string{`preference = grpo(completion = 512)`}, []string{"trl ="}},
		{"trl 1.13", grpo + `, "memsh.trl": "1.13.0", "use_vllm": true}`, []string{`preference = grpo(completion = 512, vllm = "colocate", vllm_memory = 0.3, trl = "1.10")`}, nil},
		{"trl 1.10", grpo + `, "memsh.trl": "1.10.0", "beta": 0.04}`, []string{`preference = grpo(completion = 512, beta = 0.04, trl = "1.10")`}, nil},
		{"trl 1.9", grpo + `, "memsh.trl": "1.9.1"}`, []string{`preference = grpo(completion = 512, trl = "1.8")`}, nil},
		{"generation", grpo + `, "steps_per_generation": 4, "ds3_gather_for_generation": false}`, []string{`preference = grpo(completion = 512, steps_per_generation = 4, ds3_gather = False)`}, nil},
		{"generation batch size", grpo + `, "generation_batch_size": 64}`, []string{`preference = grpo(completion = 512, generation_batch_size = 64)`}, nil},
		{"generation under vllm", grpo + `, "steps_per_generation": 4, "use_vllm": true, "vllm_mode": "server"}`, []string{`preference = grpo(completion = 512, vllm = "server")`}, []string{"steps_per_generation ="}},
		{"trl 1.8", grpo + `, "memsh.trl": "1.8.0", "use_vllm": true, "vllm_mode": "server"}`, []string{`preference = grpo(completion = 512, vllm = "server", trl = "1.8")`}, nil},
	} {
		checkImportedScript(t, tc.name, tc.config, seq, tc.want, tc.not)
	}
	const bare = `{"per_device_train_batch_size": 8, "model_name_or_path": "meta-llama/Meta-Llama-3-8B"`
	runErrorCases(t, []errorCase{
		{name: "the trainer unsaid", file: "args.json", config: bare + `, "num_generations": 8, "use_vllm": true}`, opts: seq,
			want: "args.json:1: key num_generations: is a key of TRL's online trainers (GRPO, RLOO): say which runs it", wantHint: "memsh.trainer=grpo"},
		{name: "no seq", file: "args.json", config: bare + `, "memsh.trainer": "grpo"}`,
			want: "args.json: key max_completion_length: missing: GRPOConfig says nothing of the prompts' length", wantHint: "--seq N"},
		{name: "seq without a prompt", file: "args.json", config: bare + `, "max_completion_length": 2048, "memsh.trainer": "grpo"}`, opts: Options{Seq: 2048},
			want: "args.json:1: key max_completion_length: 2048 leaves no prompt in --seq 2048", wantHint: "--seq counts the prompt and the completion"},
		{name: "TRL 1.14", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "memsh.trl": "1.14.0"}`, opts: seq,
			want: "args.json:1: key memsh.trl: GRPOTrainer of TRL 1.14.0 is not modelled: 1.14 scores the logits with a fused log-softmax kernel (selective_log_softmax_and_entropy)", wantHint: "1.8 to 1.13, or 1.15 and later"},
		{name: "TRL 1.7", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "memsh.trl": "1.7.2"}`, opts: seq,
			want: "args.json:1: key memsh.trl: GRPOTrainer of TRL 1.7.2 is not modelled: before 1.8 its GRPOConfig and GRPOTrainer were others", wantHint: "1.8 to 1.13, or 1.15 and later"},
		{name: "liger", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "use_liger_kernel": true}`, opts: seq,
			want: "args.json:1: key use_liger_kernel: not modelled with GRPO: Liger's kernels under GRPOTrainer's fused LM head", wantHint: "docs/grpo.md"},
		{name: "lm head in fp32", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "cast_lm_head_to_fp32": true}`, opts: seq,
			want: "args.json:1: key cast_lm_head_to_fp32: not modelled with GRPO: the LM head in fp32 (ScaleRL's recipe)", wantHint: "docs/grpo.md"},
		{name: "entropy bonus", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "entropy_coef": 0.01}`, opts: seq,
			want: "args.json:1: key entropy_coef: not modelled with GRPO: an entropy bonus, a gradient through the entropy", wantHint: "docs/grpo.md"},
		{name: "negative beta", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "beta": -0.1}`, opts: seq,
			want: "args.json:1: key beta: want a number of 0 or more, got -0.1", wantHint: "the KL coefficient"},
		{name: "generation batch size and steps", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "generation_batch_size": 64, "steps_per_generation": 2}`, opts: seq,
			want: "args.json:1: key generation_batch_size: set with steps_per_generation", wantHint: "refuses both"},
		{name: "steps per generation 0", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "steps_per_generation": 0}`, opts: seq,
			want: "args.json:1: key steps_per_generation: 0 is out of range (want 1 to 1048576)", wantHint: ""},
		{name: "unknown vllm mode", file: "args.json", config: bare + `, "memsh.trainer": "grpo", "use_vllm": true, "vllm_mode": "remote"}`, opts: seq,
			want: `args.json:1: key vllm_mode: unknown vLLM mode remote`, wantHint: `"colocate" or "server"`},
	})
}

// TestHFGRPOKeys: every field of GRPOConfig at TRL 1.16.0 (grpo_config.py)
// and the `trl grpo` script's reward_funcs (trl/scripts/grpo.py
// GRPOScriptArguments) is read, listed as changing nothing replayed, or
// refused; SAPO's and VESPO's coefficients, the off-policy mask, the
// bias-corrected KL and the reward aggregation are the loss's and the
// rewards' arithmetic on [rows, completion] tensors, the adaptive entropy
// bounds act only with use_adaptive_entropy (refused), tool calls and
// transformers' continuous batching are the generation's. Before, each was
// listed as not understood.
func TestHFGRPOKeys(t *testing.T) {
	const config = `{"per_device_train_batch_size": 8, "model_name_or_path": "meta-llama/Meta-Llama-3-8B", "memsh.trainer": "grpo", ` +
		`"loss_type": "sapo", "sapo_temperature_neg": 1.05, "sapo_temperature_pos": 1.0, "vespo_k_pos": 2.0, "vespo_lambda_pos": 3.0, ` +
		`"vespo_k_neg": 3.0, "vespo_lambda_neg": 2.0, "multi_objective_aggregation": "normalize_then_sum", "entropy_coef_min": 0.0, ` +
		`"entropy_coef_max": 1.0, "entropy_coef_delta": 0.005, "entropy_target": 0.2, "max_tool_calling_iterations": 4, ` +
		`"off_policy_mask_threshold": 0.5, "use_bias_correction_kl": true, "log_completions_hub_repo": "me/completions", ` +
		`"use_transformers_continuous_batching": true, "transformers_continuous_batching_config": {"max_batch_tokens": 4096}, ` +
		`"vllm_importance_sampling_cap": 3.0, "reward_funcs": ["accuracy_reward", "think_format_reward"]}`
	res, err := Import("grpo.json", []byte(config), defaults(Options{Seq: 1536}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown) > 0 {
		t.Errorf("not understood: %v", res.Unknown)
	}
	// A reward model (the script's reward_model_name_or_path, a reward_funcs
	// entry GRPOTrainer loads with AutoModelForSequenceClassification,
	// grpo_trainer.py __init__) stays on each GPU through the step, prepared
	// as the reference is: memory memsh does not replay.
	runErrorCases(t, []errorCase{
		{name: "reward model", file: "args.json", opts: Options{Seq: 1536},
			config:   `{"per_device_train_batch_size": 8, "model_name_or_path": "meta-llama/Meta-Llama-3-8B", "memsh.trainer": "grpo", "reward_model_name_or_path": "Skywork/Skywork-Reward-V2-Llama-3.1-8B"}`,
			want:     "args.json:1: key reward_model_name_or_path: not modelled with GRPO: a reward model's weights on each GPU through the step (grpo_trainer.py: AutoModelForSequenceClassification, prepared as the reference)",
			wantHint: "docs/grpo.md"},
	})
}
