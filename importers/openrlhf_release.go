package importers

import (
	"fmt"
	"strconv"
	"strings"
)

// openrlhfRelease is an OpenRLHF release: major, minor, patch and post
// ("0.9.1.post1" is {0, 9, 1, 1}).
type openrlhfRelease [4]int

// parseOpenRLHFRelease reads "0.9.1" or "0.10.1.post2" (a leading v
// allowed, as the tags write it).
func parseOpenRLHFRelease(s string) (openrlhfRelease, bool) {
	var r openrlhfRelease
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) < 3 || len(parts) > 4 {
		return r, false
	}
	for i, p := range parts {
		if i == 3 {
			var ok bool
			if p, ok = strings.CutPrefix(p, "post"); !ok {
				return r, false
			}
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1000 {
			return r, false
		}
		r[i] = n
	}
	return r, true
}

func (r openrlhfRelease) String() string {
	s := fmt.Sprintf("%d.%d.%d", r[0], r[1], r[2])
	if r[3] > 0 {
		s += fmt.Sprintf(".post%d", r[3])
	}
	return s
}

func (r openrlhfRelease) less(o openrlhfRelease) bool {
	for i := range r {
		if r[i] != o[i] {
			return r[i] < o[i]
		}
	}
	return false
}

// rel is a release this file names, known to parse.
func rel(s string) openrlhfRelease {
	r, ok := parseOpenRLHFRelease(s)
	if !ok {
		panic("openrlhf release " + s)
	}
	return r
}

// The releases the flat reading spans (OpenRLHF/OpenRLHF's tags):
// v0.10.2 (2026-04-19) gave every argument its dotted name, so
// v0.10.1.post2 is the last that takes the flat ones; before v0.7.0 the
// SFT loop scored output.logits with its GPTLMLoss (a shifted fp32 copy
// of the logits under nn.CrossEntropyLoss, models/loss.py at v0.6.4) and
// DPO took the log-softmax of the whole logits itself
// (DPOTrainer._get_batch_logps at v0.6.4): v0.7.0 made both Actor's
// log_probs_from_logits (flash-attn's cross-entropy over the fp32
// logits), which is what memsh replays, unchanged up to v0.11.0.
var (
	openrlhfFirstDotted = rel("0.10.2")
	openrlhfLastFlat    = rel("0.10.1.post2")
	openrlhfFirstRead   = rel("0.7.0")
	openrlhfNewest      = rel("0.11.0")
)

// openrlhfTransformers is the transformers release each OpenRLHF release
// pins (requirements.txt at its tag, transformers==; v0.9.4's >=4.57.6 as
// 4.57.6), from the release on which the pin took effect.
var openrlhfTransformers = []struct {
	since openrlhfRelease
	pin   string
}{
	{rel("0.7.0"), "4.50.0"}, {rel("0.7.0.post1"), "4.51.3"}, {rel("0.8.2"), "4.52.3"}, {rel("0.8.5"), "4.52.4"},
	{rel("0.8.6"), "4.53.1"}, {rel("0.8.8"), "4.54.1"}, {rel("0.8.10"), "4.55.2"}, {rel("0.8.11"), "4.56.1"},
	{rel("0.9.0"), "4.57.0"}, {rel("0.9.1"), "4.57.3"}, {rel("0.9.3"), "4.57.6"}, {rel("0.9.5"), "5.3.0"},
	{rel("0.9.10"), "5.5.0"}, {rel("0.10.0"), "5.5.3"}, {rel("0.10.1.post2"), "5.5.4"}, {rel("0.10.3"), "5.7.0"},
	{rel("0.11.0"), "5.15.0"},
}

// transformersOf is the transformers release r pins.
func transformersOf(r openrlhfRelease) string {
	pin := openrlhfTransformers[0].pin
	for _, p := range openrlhfTransformers {
		if !r.less(p.since) {
			pin = p.pin
		}
	}
	return pin
}

// openrlhfFlagSpan is the releases whose argparse takes a flat argument
// that not every release from v0.3.6 to v0.10.1.post2 takes (the others
// span them all): train_sft.py, train_dpo.py, read at every tag. A
// release that lacks one of the script's arguments would stop at
// parse_args ("unrecognized arguments"), so the script's own arguments
// bound its release. Where train_dpo.py's span differs, dpo says it.
var openrlhfFlagSpan = map[string]struct{ since, until, dpoSince, dpoUntil string }{
	"bf16":                    {"0.3.6", "0.9.1.post1", "", ""},
	"flash_attn":              {"0.3.6", "0.8.9.post1", "", ""},
	"attn_implementation":     {"0.8.10", "0.10.1.post2", "", ""},
	"param_dtype":             {"0.9.2", "0.10.1.post2", "", ""},
	"dataloader_num_workers":  {"0.9.10", "0.10.1.post2", "", ""},
	"disable_trace_cache":     {"0.3.6", "0.5.4", "", ""},
	"use_tensorboard":         {"0.4.4", "0.10.1.post2", "", ""},
	"lr_warmup_ratio":         {"0.5.3", "0.10.1.post2", "", ""},
	"ring_attn_size":          {"0.5.4", "0.10.1.post2", "0.4.3", ""},
	"ring_head_stride":        {"0.5.4", "0.10.1.post2", "0.4.3", ""},
	"overlap_comm":            {"0.5.5", "0.10.1.post2", "", ""},
	"save_hf_ckpt":            {"0.5.7", "0.10.1.post2", "", ""},
	"disable_ds_ckpt":         {"0.5.7", "0.10.1.post2", "", ""},
	"multiturn":               {"0.5.7", "0.10.1.post2", "", ""},
	"use_ms":                  {"0.5.9.post1", "0.10.1.post2", "", ""},
	"torch_compile":           {"0.6.2", "0.7.0.post1", "", ""},
	"full_determinism":        {"0.6.2", "0.10.1.post2", "", ""},
	"use_liger_kernel":        {"0.6.2", "0.10.1.post2", "", ""},
	"universal_ckpt":          {"0.6.3", "0.6.3.post2", "", ""},
	"use_ds_universal_ckpt":   {"0.6.4", "0.10.1.post2", "", ""},
	"eval_dataset":            {"0.7.0", "0.10.1.post2", "", ""},
	"deepcompile":             {"0.7.1", "0.10.1.post2", "", ""},
	"ds_tensor_parallel_size": {"0.7.4", "0.10.1.post2", "", ""},
	"dataset_split":           {"0.7.4", "0.10.1.post2", "", ""},
	"train_split":             {"0.3.6", "0.10.1.post2", "", "0.6.4"},
	"packing_samples":         {"0.3.6", "0.10.1.post2", "0.3.7", ""},
	"nll_loss_coef":           {"0.3.8", "0.10.1.post2", "", ""},
	"lr_scheduler":            {"0.3.6", "0.10.1.post2", "0.8.5", ""},
	"min_lr_ratio":            {"0.10.2", "", "0.8.7", ""}, // train_sft.py takes it from v0.10.2 (dotted) only
	"tokenizer_chat_template": {"0.3.6", "0.10.1.post2", "0.8.11", ""},
}

// span is the releases of entry point dpo (or train_sft) that take flag:
// every flat release when the table says nothing of it.
func openrlhfSpan(flag string, dpo bool) (from, to openrlhfRelease) {
	from, to = rel("0.3.6"), openrlhfLastFlat
	s, ok := openrlhfFlagSpan[flag]
	if !ok {
		return from, to
	}
	since, until := s.since, s.until
	if dpo && s.dpoSince != "" {
		since = s.dpoSince
	}
	if dpo && s.dpoUntil != "" {
		until = s.dpoUntil
	}
	if since != "" {
		from = rel(since)
	}
	if until != "" {
		to = rel(until)
	}
	return from, to
}
