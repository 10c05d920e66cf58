package importers

import (
	"fmt"
	"strconv"
	"strings"
)

// axolotlGRPO reads Axolotl's rl: grpo (or gdpo, the same trainer with
// each reward normalized apart) as TRL's GRPOTrainer at the release
// Axolotl pins (trl==1.8.0 at 067b021c8), train(preference = grpo(...,
// trl = "1.8"), docs/grpo.md). At 067b021c8 (src/axolotl/core/trainers/
// grpo/__init__.py GRPOStrategy.set_training_args_kwargs, core/builders/
// rl.py, utils/schemas/trl.py and vllm.py):
//
//   - AxolotlGRPOTrainer is GRPOTrainer with Axolotl's optimizer,
//     scheduler and RNG mixins: TRL 1.8's step (core/grpo_logits.go);
//   - trl.max_completion_length reaches GRPOConfig whatever it is, null
//     included (an unbounded generation: refused), trl.beta (else rl_beta)
//     the KL coefficient, trl.use_vllm with trl.vllm_mode (null: TRL's
//     "colocate"), and under colocate trl.vllm_enable_sleep_mode and the
//     vllm: block's gpu_memory_utilization (VllmConfig's default 0.9);
//   - the reference (TRL 1.8 GRPOTrainer.__init__): none with beta 0, the
//     adapters disabled under an adapter, else a copy GRPOTrainer loads
//     itself with create_model_from_path and Axolotl's empty
//     model_init_kwargs: in fp32 beside the policy (refused, as for KTO);
//   - trl.use_liger_loss (Liger's GRPO loss), the async trainer
//     (trl.use_data_producer, trl.async_prefetch: AxolotlAsyncGRPOTrainer)
//     and a reward model among trl.reward_funcs (a Hub id or a folder,
//     loaded with AutoModelForSequenceClassification and held on each GPU)
//     are refused; the sampling, reward and loss keys change the generation
//     or arithmetic on [rows, completion] tensors (axolotlGRPONoEffect);
//   - sequence_len reaches no GRPOConfig key (GRPOStrategy blocklists
//     max_length and max_prompt_length): a row is the batch's longest
//     prompt plus max_completion_length, which --seq says;
//   - gradient_checkpointing and bf16 are Axolotl's (schemas/config.py:
//     False unless set), passed to GRPOConfig over its own defaults.
func axolotlGRPO(t *tree, adapter string, seq int64) (string, error) {
	const hint = "leave it out, or write the plan in Starlark (train(preference=grpo(...)): docs/grpo.md)"
	if err := t.refuseOn(hint, "rl grpo", []keyWhat{
		{"trl.use_liger_loss", "Liger's fused GRPO loss"},
		{"trl.use_data_producer", "Axolotl's asynchronous GRPO trainer"},
		{"trl.async_prefetch", "Axolotl's asynchronous GRPO trainer"},
	}); err != nil {
		return "", err
	}
	if v, _ := t.get("trl.reward_funcs"); v != nil {
		if l, ok := v.([]any); ok {
			for _, f := range l {
				if s, ok := f.(string); ok && strings.Contains(s, "/") {
					return "", t.errorf("trl.reward_funcs", hint, "not modelled with rl grpo: a reward model (%s), whose weights GRPOTrainer keeps on each GPU through the step", s)
				}
			}
		}
	}
	if v, _ := t.get("trl.max_completion_length"); v == nil {
		return "", t.errorf("trl.max_completion_length", "the tokens each completion may have: trl: {max_completion_length: 512}",
			"missing: Axolotl hands GRPOConfig max_completion_length null, a generation without a bound")
	}
	completion, err := t.integer("trl.max_completion_length", 0, 1, 1<<24)
	if err != nil {
		return "", err
	}
	switch {
	case seq == 0:
		return "", t.errorf("trl.max_completion_length", fmt.Sprintf("the tokens per row, the longest prompt plus max_completion_length (%d): --seq N", completion),
			"GRPO's rows are each prompt and its completion, which sequence_len does not bound (Axolotl passes it to no GRPOConfig key): say --seq")
	case seq <= completion:
		return "", t.errorf("trl.max_completion_length", "--seq counts the prompt and the completion", "%d leaves no prompt in --seq %d", completion, seq)
	}
	args := []string{fmt.Sprintf("completion = %d", completion)}
	beta := 0.0
	for _, k := range []string{"trl.beta", "rl_beta"} {
		if v, _ := t.get(k); v != nil {
			f, ok := toFloat(v)
			if !ok || f < 0 {
				return "", t.errorf(k, "the KL coefficient: 0 or more (0 loads no reference model)", "want a number of 0 or more, got %s", describe(v))
			}
			beta = f
			break
		}
	}
	if beta != 0 {
		if adapter == "" {
			return "", t.errorf("rl", "add an adapter (adapter: lora; the reference is then the policy with its adapters disabled), set trl.beta to 0, or write the plan in Starlark",
				"not modelled: rl grpo with beta > 0 without an adapter (GRPOTrainer loads its reference copy in fp32, create_model_from_path's default, beside the policy)")
		}
		args = append(args, "beta = "+strconv.FormatFloat(beta, 'g', -1, 64))
	}
	useVLLM, err := t.boolean("trl.use_vllm", false)
	if err != nil {
		return "", err
	}
	if useVLLM {
		mode, err := t.str("trl.vllm_mode", "colocate")
		if err != nil {
			return "", err
		}
		switch mode {
		case "server":
			args = append(args, `vllm = "server"`)
		case "colocate":
			util, err := t.probability("vllm.gpu_memory_utilization", 0.9)
			if err != nil {
				return "", err
			}
			if util == 0 {
				return "", t.errorf("vllm.gpu_memory_utilization", "above 0 and below 1 (0.9 by default)", "vLLM takes no memory at 0")
			}
			args = append(args, `vllm = "colocate"`, "vllm_memory = "+strconv.FormatFloat(util, 'g', -1, 64))
			sleep, err := t.boolean("trl.vllm_enable_sleep_mode", false)
			if err != nil {
				return "", err
			}
			if sleep {
				args = append(args, "sleep = True")
			}
		default:
			return "", t.errorf("trl.vllm_mode", `"colocate" or "server"`, "unknown vLLM mode %s", quoteKey(mode))
		}
	}
	if _, ok := t.leaves["trl.generation_batch_size"]; ok && !useVLLM { // transformers' generate's prompts, replayed (docs/grpo.md)
		n, err := t.integer("trl.generation_batch_size", 0, 1, 1<<20)
		if err != nil {
			return "", err
		}
		args = append(args, fmt.Sprintf("generation_batch_size = %d", n))
	}
	return "grpo(" + strings.Join(append(args, `trl = "1.8"`), ", ") + ")", nil
}

// axolotlGRPONoEffect are the trl: and vllm: keys of Axolotl's GRPO
// (utils/schemas/trl.py, vllm.py at 067b021c8) whose effect is on the
// generation (its sampling, the vLLM server or engine's own settings),
// the rewards or the loss's arithmetic on [rows, completion] tensors.
var axolotlGRPONoEffect = []string{
	"trl.num_generations", "trl.generation_batch_size", "trl.temperature", "trl.top_p", "trl.top_k", "trl.min_p",
	"trl.repetition_penalty", "trl.generation_kwargs.*", "trl.chat_template_kwargs.*", "trl.vllm_guided_decoding_regex",
	"trl.vllm_server_host", "trl.vllm_server_port", "trl.vllm_server_timeout", "trl.vllm_lora_sync", "trl.rollout_func",
	"trl.reward_funcs", "trl.reward_weights", "trl.multi_objective_aggregation",
	"trl.scale_rewards", "trl.loss_type", "trl.epsilon", "trl.epsilon_high", "trl.num_iterations", "trl.importance_sampling_level",
	"trl.mask_truncated_completions", "trl.log_completions", "trl.num_completions_to_print", "trl.sync_ref_model",
	"trl.ref_model_mixup_alpha", "trl.ref_model_sync_steps", "trl.vllm_importance_sampling_correction",
	"trl.vllm_importance_sampling_mode", "trl.vllm_importance_sampling_cap", "trl.off_policy_mask_threshold",
	"trl.use_bias_correction_kl", "vllm.host", "vllm.port", "vllm.dtype", "vllm.max_model_len", "vllm.tensor_parallel_size",
	"vllm.data_parallel_size", "vllm.enable_prefix_caching", "vllm.enable_reasoning", "vllm.reasoning_parser", "vllm.device",
	"vllm.enforce_eager", "vllm.serve_module", "vllm.worker_extension_cls",
	// the asynchronous trainer's fields, which Axolotl filters out of the
	// synchronous GRPOConfig (core/builders/rl.py)
	"trl.prefetch_depth", "trl.vllm_sync_interval", "trl.streaming_partial_batch", "trl.streaming_min_groups",
	"trl.reward_num_workers", "trl.replay_buffer_size", "trl.replay_recompute_logps", "trl.reroll_start_fraction",
	"trl.reroll_max_groups", "trl.skip_zero_advantage_batches",
}
