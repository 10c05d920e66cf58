package importers

import (
	"strconv"
	"strings"
)

// hfTRL reads memsh.trl, the job's TRL release ("1.16.0"), and reports
// whether its SFTTrainer computes the loss through its fused LM head:
// from 1.15 SFTTrainer.__init__ calls add_fused_lm_head and compute_loss
// calls model(**inputs, fused_lm_head=True) (trl/trainer/sft_trainer.py at
// 1.15.0 and 1.16.0), which train(loss_chunks="trl") replays
// (docs/liger.md); before it, the model's own logits and cross-entropy,
// which memsh replays when the key is absent.
func hfTRL(t *tree) (bool, error) {
	major, minor, set, err := hfTRLRelease(t)
	return set && trlFusedHead(major, minor), err
}

// trlFusedHead says whether TRL major.minor has the fused LM head its
// trainers run (add_fused_lm_head: 1.15 and later).
func trlFusedHead(major, minor int) bool { return major > 1 || (major == 1 && minor >= 15) }

// hfTRLRelease reads memsh.trl, the job's TRL release, as its major and
// minor numbers; set is false when the config does not say it.
func hfTRLRelease(t *tree) (major, minor int, set bool, err error) {
	const key, hint = "memsh.trl", "the job's TRL release, as pip show trl prints it: memsh.trl=1.16.0"
	raw, _ := t.get(key)
	if raw == nil {
		return 0, 0, false, nil
	}
	v, ok := raw.(string)
	if !ok { // 1.10 read as a number would be 1.1
		return 0, 0, false, t.errorf(key, hint, "want a TRL release such as 1.16.0, got %s", describe(raw))
	}
	parts := strings.Split(v, ".")
	nums := make([]int, 0, 3)
	for _, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || n > 1000 {
			return 0, 0, false, t.errorf(key, hint, "want a TRL release such as 1.16.0, got %s", quoteKey(v))
		}
		nums = append(nums, n)
	}
	if len(nums) < 2 || len(nums) > 3 {
		return 0, 0, false, t.errorf(key, hint, "want a TRL release such as 1.16.0, got %s", quoteKey(v))
	}
	return nums[0], nums[1], true, nil
}

// hfTRLLayout refuses the layouts train(loss_chunks="trl") does not
// model, once the plan has its layout.
func hfTRLLayout(t *tree, p *plan) error {
	if par := p.value("parallel"); strings.Contains(par, "zero = 3") || strings.Contains(par, "fsdp = ") {
		return t.errorf("memsh.trl", "leave memsh.trl out: memsh then replays the logits' cross-entropy (more memory than TRL's head takes: an upper bound)",
			"TRL 1.15's fused LM head under ZeRO-3 or FSDP (lm_head.weight gathered around the head) is not modelled")
	}
	return nil
}
