package importers

import (
	"fmt"
)

// hfKTONoEffect are KTOConfig's keys (trl/trainer/kto_config.py, 1.8.0 and
// 1.16.0) whose effect is on the loss's [rows] arithmetic or the data's
// order: nothing memsh replays.
var hfKTONoEffect = []string{"desirable_weight", "undesirable_weight", "train_sampling_strategy"}

// hfKTO reads a TRL KTOConfig (memsh.trainer=kto) as train(preference=)'s
// kto() expression (docs/kto.md): loss_type "kto" (the default, with its KL
// forwards) or "apo_zero_unpaired"; the release memsh.trl's (absent: the
// current one, whose fused LM head KTO runs: trl="1.15"; 1.8.x: its logits
// path, trl="1.8"; the releases between are refused); the reference as
// KTOTrainer.__init__ makes it with the CLI's model name (trl/scripts/
// kto.py passes model_name_or_path and model_init_kwargs, the reference
// loaded with the same): none under use_peft (the policy with its adapters
// disabled) or precompute_ref_log_probs, else a copy.
// per_device_train_batch_size must be 2 or more with the KL term, as
// KTOTrainer requires.
func hfKTO(t *tree) (string, error) {
	const refuse = "leave it out, or write the plan in Starlark (train(preference=kto(...)): docs/kto.md)"
	if err := t.refuseOn(refuse, "KTO", []keyWhat{
		{"use_liger_kernel", "Liger's fused KTO loss (LigerFusedLinearKTOLoss)"},
		{"padding_free", "rows packed without padding"},
	}); err != nil {
		return "", err
	}
	loss, err := t.str("loss_type", "kto")
	if err != nil {
		return "", err
	}
	if loss != "kto" && loss != "apo_zero_unpaired" {
		return "", t.errorf("loss_type", `"kto" or "apo_zero_unpaired" (KTOConfig's losses)`, "unknown KTO loss %s", quoteKey(loss))
	}
	if loss == "kto" {
		rows, err := t.integer("per_device_train_batch_size", 8, 1, 1<<20)
		if err != nil {
			return "", err
		}
		if rows < 2 {
			return "", t.errorf("per_device_train_batch_size", `2 or more, or loss_type: "apo_zero_unpaired"`,
				"KTOTrainer refuses a per-device batch of %d with loss_type kto: its KL term would be the implied reward", rows)
		}
	}
	trl, err := hfKTORelease(t)
	if err != nil {
		return "", err
	}
	ref, err := hfPreferenceReference(t)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("kto(loss = %s, reference = %s, trl = %s)", str(loss), str(ref), str(trl)), nil
}

// hfKTORelease is the kto(trl=) spelling of memsh.trl's release: "1.15"
// from 1.15 (and when absent), "1.8" for 1.8.x; KTOTrainer of 1.9 to 1.14
// is refused (1.13 moved the logits' copies after the entropy, 1.14 fused
// the log-softmax: not modelled).
func hfKTORelease(t *tree) (string, error) {
	const key, hint = "memsh.trl", "the job's TRL release, as pip show trl prints it: memsh.trl=1.16.0"
	major, minor, set, err := hfTRLRelease(t)
	switch {
	case err != nil:
		return "", err
	case !set || trlFusedHead(major, minor):
		return "1.15", nil
	case major == 1 && minor == 8:
		return "1.8", nil
	}
	raw, _ := t.get(key)
	return "", t.errorf(key, hint+" (1.8, or 1.15 and later)", "KTOTrainer of TRL %s is not modelled", raw.(string))
}
