package importers

import (
	"fmt"
)

// hfPreferenceKeys are keys of TRL's preference configs (DPOConfig, and
// KTO's, ORPO's, CPO's alike) that no SFTConfig or TrainingArguments has
// (trl/trainer/dpo_config.py at 1.16.0): a file with one is a preference
// run, never read as SFT.
var hfPreferenceKeys = []string{"beta", "max_prompt_length", "precompute_ref_log_probs", "ref_model_init_kwargs", "rpo_alpha",
	"sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "f_divergence_type", "reference_free", "use_weighting",
	"desirable_weight", "undesirable_weight", "ld_alpha", "discopop_tau"}

// hfOnlineKeys are keys of TRL's GRPOConfig and RLOOConfig (trl/trainer/
// grpo_config.py and rloo_config.py at 1.16.0) that no SFTConfig or
// DPOConfig has: a file with one generates its completions, and is read
// as GRPO's once memsh.trainer=grpo says so (hfGRPO), never as SFT.
var hfOnlineKeys = []string{"num_generations", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode",
	"steps_per_generation", "generation_batch_size", "num_iterations", "reward_weights", "epsilon_high", "mask_truncated_completions"}

// grpoHint is what a config of TRL's online trainers gets without
// memsh.trainer=grpo.
const grpoHint = "memsh.trainer=grpo for TRL's GRPOTrainer, with --seq N (the longest prompt plus max_completion_length); RLOO is not modelled"

// hfDPONoEffect are DPOConfig's keys whose effect is on the loss's
// [batch] arithmetic, the data or evaluation: nothing memsh replays.
var hfDPONoEffect = []string{"beta", "max_prompt_length", "max_completion_length", "truncation_mode", "loss_type", "loss_weights",
	"label_smoothing", "f_divergence_type", "f_alpha_divergence_coef", "precompute_ref_batch_size", "generate_during_eval",
	"ld_alpha", "discopop_tau", "sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "ref_model_init_kwargs.*",
	"tools", "disable_dropout", "use_logits_to_keep"}

// hfPreference reads a TRL preference config: "" when the file has none
// of hfPreferenceKeys, else train(preference=)'s dpo() expression, or
// kto()'s under memsh.trainer=kto (hfKTO). The trainer must be said
// (memsh.trainer=dpo or kto): ORPO's and CPO's configs share the keys and
// are not modelled. The TRL release is
// memsh.trl's (absent: the current one, 1.16, whose fused LM head DPO
// runs: dpo(trl="1.15")); from 1.8 to 1.13 its logits path
// (dpo(trl="1.8")); 1.14 and earlier than 1.8 are refused. The reference
// (DPOTrainer.__init__, the CLI passing no ref_model): the policy without
// its adapters under use_peft, none with precompute_ref_log_probs, else a
// copy of the model.
func hfPreference(t *tree) (string, error) {
	trainer, err := t.str("memsh.trainer", "")
	if err != nil {
		return "", err
	}
	if trainer == "grpo" {
		return hfGRPO(t)
	}
	for _, k := range hfOnlineKeys {
		if _, ok := t.leaves[k]; ok {
			return "", t.errorf(k, grpoHint, "is a key of TRL's online trainers (GRPO, RLOO): say which runs it")
		}
	}
	found := ""
	for _, k := range hfPreferenceKeys {
		if _, ok := t.leaves[k]; ok {
			found = k
			break
		}
	}
	if found == "" {
		return "", nil
	}
	const hint = "say which trainer runs it: memsh.trainer=dpo (TRL's DPOTrainer) or memsh.trainer=kto (its KTOTrainer); ORPO and CPO are not modelled"
	switch trainer {
	case "dpo":
	case "kto":
		return hfKTO(t)
	case "":
		return "", t.errorf(found, hint, "is a key of TRL's preference trainers (DPO, KTO, ORPO, CPO), not of SFT")
	default:
		return "", t.errorf("memsh.trainer", hint, "trainer %s is not modelled", quoteKey(trainer))
	}
	const refuse = "leave it out, or write the plan in Starlark (train(preference=dpo(...)): docs/dpo.md)"
	if err := t.refuseOn(refuse, "DPO", []keyWhat{
		{"padding_free", "pairs packed without padding"},
		{"use_liger_kernel", "Liger's chunked DPO loss"},
		{"use_weighting", "WPO's weights"},
		{"reference_free", "a reference-free loss"},
	}); err != nil {
		return "", err
	}
	if v, _ := t.get("rpo_alpha"); v != nil { // None by default; a weight turns the term on
		return "", t.errorf("rpo_alpha", refuse, "not modelled with DPO: RPO's NLL term on the chosen rows")
	}
	trl, err := hfDPORelease(t)
	if err != nil {
		return "", err
	}
	ref, err := hfPreferenceReference(t)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("dpo(reference = %s, trl = %s)", str(ref), str(trl)), nil
}

// hfDPORelease is the dpo(trl=) spelling of memsh.trl's release: "1.15"
// from 1.15 (and when absent: the current release), "1.8" from 1.8 to
// 1.13.
func hfDPORelease(t *tree) (string, error) {
	const key, hint = "memsh.trl", "the job's TRL release, as pip show trl prints it: memsh.trl=1.16.0"
	major, minor, set, err := hfTRLRelease(t)
	switch {
	case err != nil:
		return "", err
	case !set || trlFusedHead(major, minor):
		return "1.15", nil
	case major == 1 && minor >= 8 && minor <= 13:
		return "1.8", nil
	}
	raw, _ := t.get(key)
	return "", t.errorf(key, hint+" (1.8 to 1.13, or 1.15 and later)", "DPOTrainer of TRL %s is not modelled", raw.(string))
}

// keyWhat is a boolean option and what it turns on.
type keyWhat struct{ key, what string }

// refuseOn refuses the first of opts the config turns on, a config error
// "not modelled with <with>: <what>" naming its key; nil when none is on.
func (t *tree) refuseOn(hint, with string, opts []keyWhat) error {
	for _, k := range opts {
		on, err := t.boolean(k.key, false)
		if err != nil {
			return err
		}
		if on {
			return t.errorf(k.key, hint, "not modelled with %s: %s", with, k.what)
		}
	}
	return nil
}

// hfPreferenceReference is where a TRL preference trainer's reference
// log-probabilities come from: precompute_ref_log_probs, else the policy
// with its adapters disabled under use_peft, else a copy of the model.
func hfPreferenceReference(t *tree) (string, error) {
	peft, err := t.boolean("use_peft", false)
	if err != nil {
		return "", err
	}
	precompute, err := t.boolean("precompute_ref_log_probs", false)
	if err != nil {
		return "", err
	}
	switch {
	case precompute:
		return "precomputed", nil
	case peft:
		return "adapters", nil
	}
	return "model", nil
}
