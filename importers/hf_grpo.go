package importers

import (
	"fmt"
	"strconv"
	"strings"
)

// hfGRPONoEffect are GRPOConfig's keys (trl/trainer/grpo_config.py at
// 1.16.0) whose effect is on the generation, the rewards, the loss's
// [rows, completion] arithmetic or the logging: nothing the step's replay
// holds (docs/grpo.md).
var hfGRPONoEffect = []string{"num_generations", "num_generations_eval", "steps_per_generation", "generation_batch_size", "num_iterations",
	"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "generation_kwargs.*", "chat_template_kwargs.*", "cache_implementation",
	"epsilon", "epsilon_high", "delta", "loss_type", "scale_rewards", "reward_weights", "mask_truncated_completions", "importance_sampling_level",
	"top_entropy_quantile", "sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "use_transformers_paged", "shuffle_dataset",
	"log_completions", "num_completions_to_print", "log_unique_prompts", "log_multimodal", "disable_dropout", "ds3_gather_for_generation",
	"vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_server_timeout", "vllm_group_port", "vllm_model_impl",
	"vllm_max_model_length", "vllm_tensor_parallel_size", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
	"vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min", "vllm_structured_outputs_regex", "router_aux_loss_coef",
	"max_completion_length", "beta", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode",
	"model_init_kwargs.*", "remove_unused_columns", "pad_to_multiple_of", "trust_remote_code",
	// SAPO's and VESPO's coefficients, the off-policy sequence mask and the
	// bias-corrected KL weigh the per-token loss (_compute_loss); the reward
	// aggregation and the script's reward functions (trl/scripts/grpo.py
	// GRPOScriptArguments.reward_funcs, Python on the completions' text) make
	// the advantages before the step; the adaptive entropy bounds act only
	// with use_adaptive_entropy (refused); tool-calling turns and
	// transformers' continuous batching (use_transformers_paged's successor;
	// vllm_importance_sampling_cap is clip_max's deprecated name) are the
	// generation's.
	"sapo_temperature_neg", "sapo_temperature_pos", "vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg",
	"off_policy_mask_threshold", "use_bias_correction_kl", "multi_objective_aggregation", "reward_funcs",
	"entropy_coef_min", "entropy_coef_max", "entropy_coef_delta", "entropy_target", "max_tool_calling_iterations",
	"use_transformers_continuous_batching", "transformers_continuous_batching_config.*", "vllm_importance_sampling_cap",
	"log_completions_hub_repo"}

// hfGRPO reads a TRL GRPOConfig (memsh.trainer=grpo) as train(preference=)'s
// grpo() expression (docs/grpo.md): max_completion_length (512), beta
// (0.0), use_vllm with vllm_mode (colocate), vllm_gpu_memory_utilization
// (0.3) and vllm_enable_sleep_mode; the release memsh.trl's (absent: the
// current one; hfGRPORelease).
func hfGRPO(t *tree) (out string, err error) {
	const refuse = "leave it out, or write the plan in Starlark (train(preference=grpo(...)): docs/grpo.md)"
	if err := t.refuseOn(refuse, "GRPO", []keyWhat{
		{"use_liger_kernel", "Liger's kernels under GRPOTrainer's fused LM head"},
		{"cast_lm_head_to_fp32", "the LM head in fp32 (ScaleRL's recipe)"},
		{"use_adaptive_entropy", "an entropy bonus, a gradient through the entropy"},
	}); err != nil {
		return "", err
	}
	// A reward model (GRPOTrainer.__init__ loads a reward_funcs path with
	// AutoModelForSequenceClassification and prepares it as the reference:
	// sharded under ZeRO-3, else whole) stays on each GPU through the step.
	if v, _ := t.get("reward_model_name_or_path"); v != nil && v != "" {
		return "", t.errorf("reward_model_name_or_path", refuse, "not modelled with GRPO: a reward model's weights on each GPU through the step (grpo_trainer.py: AutoModelForSequenceClassification, prepared as the reference)")
	}
	if v, _ := t.get("entropy_coef"); v != nil {
		if f, ok := toFloat(v); !ok || f != 0 {
			return "", t.errorf("entropy_coef", refuse, "not modelled with GRPO: an entropy bonus, a gradient through the entropy")
		}
	}
	for _, k := range []string{"max_prompt_length", "vllm_device"} { // gone by 1.8.0 (prompts no longer cut; vllm_mode)
		if _, ok := t.leaves[k]; ok {
			return "", t.errorf(k, "memsh models GRPOTrainer from TRL 1.8; for one of those drop the key (vllm_mode took vllm_device's place, prompts are no longer cut) and say --seq",
				"is a key of an older GRPOConfig (none in TRL 1.8.0): not modelled")
		}
	}
	trl, err := hfGRPORelease(t)
	if err != nil {
		return "", err
	}
	completion, err := t.integer("max_completion_length", 512, 1, 1<<24)
	if err != nil {
		return "", err
	}
	args := []string{fmt.Sprintf("completion = %d", completion)}
	defer func() {
		if trl != "" && out != "" { // the release's keyword last, as grpo() prints it
			out = strings.TrimSuffix(out, ")") + fmt.Sprintf(", trl = %q)", trl)
		}
	}()
	var beta float64
	if v, _ := t.get("beta"); v != nil {
		f, ok := toFloat(v)
		if !ok || f < 0 {
			return "", t.errorf("beta", "the KL coefficient: 0 or more (0, GRPOConfig's default, loads no reference model)", "want a number of 0 or more, got %s", describe(v))
		}
		beta = f
	}
	if beta != 0 {
		args = append(args, "beta = "+strconv.FormatFloat(beta, 'g', -1, 64))
	}
	useVLLM, err := t.boolean("use_vllm", false)
	if err != nil {
		return "", err
	}
	if !useVLLM {
		gen, err := hfGRPOGeneration(t)
		if err != nil {
			return "", err
		}
		return "grpo(" + strings.Join(append(args, gen...), ", ") + ")", nil
	}
	mode, err := t.str("vllm_mode", "colocate")
	if err != nil {
		return "", err
	}
	switch mode {
	case "server":
		return "grpo(" + strings.Join(append(args, `vllm = "server"`), ", ") + ")", nil
	case "colocate":
	default:
		return "", t.errorf("vllm_mode", `"colocate" or "server"`, "unknown vLLM mode %s", quoteKey(mode))
	}
	util, err := t.probability("vllm_gpu_memory_utilization", 0.3)
	if err != nil {
		return "", err
	}
	if util == 0 {
		return "", t.errorf("vllm_gpu_memory_utilization", "above 0 and below 1 (0.3 by default)", "vLLM takes no memory at 0")
	}
	sleep, err := t.boolean("vllm_enable_sleep_mode", false)
	if err != nil {
		return "", err
	}
	args = append(args, `vllm = "colocate"`, "vllm_memory = "+strconv.FormatFloat(util, 'g', -1, 64))
	if sleep {
		args = append(args, "sleep = True")
	}
	return "grpo(" + strings.Join(args, ", ") + ")", nil
}

// hfGRPOGeneration reads what shapes transformers' generate (use_vllm
// False), which memsh replays before the step (docs/grpo.md): its
// steps_per_generation (None: gradient_accumulation_steps, grpo()'s
// default) or generation_batch_size (every process's prompts; not both,
// as GRPOConfig.__post_init__ raises) and ds3_gather_for_generation
// (True).
func hfGRPOGeneration(t *tree) ([]string, error) {
	var out []string
	_, steps := t.leaves["steps_per_generation"]
	_, gbs := t.leaves["generation_batch_size"]
	if steps && gbs {
		return nil, t.errorf("generation_batch_size", "drop it or steps_per_generation (GRPOConfig's __post_init__ refuses both)", "set with steps_per_generation")
	}
	for _, k := range []string{"steps_per_generation", "generation_batch_size"} {
		if _, ok := t.leaves[k]; ok {
			n, err := t.integer(k, 0, 1, 1<<20)
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("%s = %d", k, n))
		}
	}
	gather, err := t.boolean("ds3_gather_for_generation", true)
	if err != nil {
		return nil, err
	}
	if !gather {
		out = append(out, "ds3_gather = False")
	}
	return out, nil
}

// hfGRPORelease is the grpo(trl=) spelling of memsh.trl's release
// (docs/grpo.md): "" from 1.15 and when absent (the current release,
// grpo()'s default), "1.10" from 1.10 to 1.13 (the logits, divided by the
// temperature into a copy), "1.8" for 1.8 and 1.9 (divided in place);
// 1.14 (a fused log-softmax kernel over the logits) and releases before
// 1.8 (another GRPOConfig) are refused.
func hfGRPORelease(t *tree) (string, error) {
	const key, hint = "memsh.trl", "the job's TRL release, as pip show trl prints it: memsh.trl=1.16.0 (1.8 to 1.13, or 1.15 and later)"
	major, minor, set, err := hfTRLRelease(t)
	switch {
	case err != nil:
		return "", err
	case !set || trlFusedHead(major, minor):
		return "", nil
	case major == 1 && minor >= 10 && minor <= 13:
		return "1.10", nil
	case major == 1 && minor >= 8 && minor <= 9:
		return "1.8", nil
	}
	raw, _ := t.get(key)
	why := "before 1.8 its GRPOConfig and GRPOTrainer were others"
	if major == 1 && minor == 14 {
		why = "1.14 scores the logits with a fused log-softmax kernel (selective_log_softmax_and_entropy)"
	}
	return "", t.errorf(key, hint, "GRPOTrainer of TRL %s is not modelled: %s", raw.(string), why)
}

// hfGRPODefaults sets what GRPOConfig defaults otherwise than
// TrainingArguments (grpo_config.py at 1.16.0: gradient_checkpointing
// True; bf16 True unless fp16, __post_init__) where the file says
// nothing, and wants --seq: GRPOConfig has no key for
// a row's length, the longest prompt (left-padded) plus
// max_completion_length.
func hfGRPODefaults(t *tree, o Options) error {
	if !t.has("activation_checkpointing") {
		t.setDefault("gradient_checkpointing", true)
	}
	fp16, err := t.boolean("fp16", false)
	if err != nil {
		return err
	}
	t.setDefault("bf16", !fp16)
	completion, err := t.integer("max_completion_length", 512, 1, 1<<24)
	if err != nil {
		return err
	}
	switch {
	case o.Seq == 0:
		return &Error{File: t.file, Key: "max_completion_length", Msg: "missing: GRPOConfig says nothing of the prompts' length",
			Hint: fmt.Sprintf("the tokens per row, the longest prompt plus max_completion_length (%d): --seq N", completion)}
	case o.Seq <= completion:
		return t.errorf("max_completion_length", "--seq counts the prompt and the completion", "%d leaves no prompt in --seq %d", completion, o.Seq)
	}
	return nil
}
