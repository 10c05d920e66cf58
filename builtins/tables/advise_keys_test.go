package tables

import (
	"testing"

	"github.com/memsh/memsh/sim/advise"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// TestSettingInConfig: an advice's setting in a trainer config's own keys
// (advise(keys=), which memsh check passes) or memsh fit's flags: a count
// or a bool as the key's value, checkpointing and compile as a true/false
// key says them (the opposite for a "!" key: LLaMA-Factory's
// disable_gradient_checkpointing), a GRPO engine put to sleep as
// vllm_enable_sleep_mode, and a keyword no key says, or a value the key
// cannot say, marked as having none.
func TestSettingInConfig(t *testing.T) {
	hf := map[string]string{"batch": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps",
		"checkpoint": "gradient_checkpointing", "compile": "torch_compile"}
	lf := map[string]string{"checkpoint": "!disable_gradient_checkpointing"}
	fit := map[string]string{"batch": "--batch", "precision": "--precision", "checkpoint": "--checkpoint", "gpu": "--gpu"}
	full, none := core.Checkpoint{Mode: "full"}, core.Checkpoint{Mode: "none"}
	every := core.Checkpoint{Mode: "every", Every: 2}
	h100, _ := hw.LookupDevice("H100-80GB")
	grpo := map[string]string{"preference": "vllm_enable_sleep_mode"}
	asleep := core.Preference{Loss: core.LossGRPO, TRL: core.TRLFusedHead, Reference: core.RefNone,
		GRPOConfig: core.GRPOConfig{Completion: 512, VLLM: core.VLLMColocate, VLLMMemory: 0.3, Sleep: true}}
	for _, tc := range []struct {
		name string
		s    advise.Setting
		keys map[string]string
		want string
	}{
		{"a count", advise.Setting{Keyword: "batch", Value: int64(4)}, hf, "per_device_train_batch_size: 4"},
		{"accumulation", advise.Setting{Keyword: "grad_accum", Value: int64(8)}, hf, "gradient_accumulation_steps: 8"},
		{"checkpointing on", advise.Setting{Keyword: "checkpoint", Value: full}, hf, "gradient_checkpointing: true"},
		{"checkpointing off", advise.Setting{Keyword: "checkpoint", Value: none}, hf, "gradient_checkpointing: false"},
		{"a policy no bool says", advise.Setting{Keyword: "checkpoint", Value: every}, hf, "checkpoint=checkpoint(every=2) (no key in the config)"},
		{"compile", advise.Setting{Keyword: "compile", Value: core.Compile{Blocks: true, Loss: true}}, hf, "torch_compile: true"},
		{"no key", advise.Setting{Keyword: "precision", Value: "bf16"}, hf, `precision="bf16" (no key in the config)`},
		{"the opposite bool, on", advise.Setting{Keyword: "checkpoint", Value: full}, lf, "disable_gradient_checkpointing: false"},
		{"the opposite bool, off", advise.Setting{Keyword: "checkpoint", Value: none}, lf, "disable_gradient_checkpointing: true"},
		{"a model's setting", advise.Setting{Keyword: "model", Value: advise.ModelChange{Text: "encoder: chunks=4"}}, hf, "encoder: chunks=4 (no key in the config)"},
		{"a flag's count", advise.Setting{Keyword: "batch", Value: int64(2)}, fit, "--batch 2"},
		{"a flag's name", advise.Setting{Keyword: "precision", Value: "bf16"}, fit, "--precision bf16"},
		{"a flag's mode", advise.Setting{Keyword: "checkpoint", Value: core.Checkpoint{Mode: "op", Save: core.DefaultSaveOps()}}, fit, "--checkpoint op"},
		{"a flag's policy it cannot say", advise.Setting{Keyword: "checkpoint", Value: every}, fit, "checkpoint=checkpoint(every=2) (no fit flag)"},
		{"the gpu flag", advise.Setting{Keyword: "gpu", Value: h100}, fit, "--gpu H100-80GB"},
		{"no flag", advise.Setting{Keyword: "grad_accum", Value: int64(2)}, fit, "grad_accum=2 (no fit flag)"},
		{"a GRPO engine asleep", advise.Setting{Keyword: "preference", Value: asleep}, grpo, "vllm_enable_sleep_mode: true"},
		{"GRPO without the key", advise.Setting{Keyword: "preference", Value: asleep}, hf,
			`preference=grpo(completion=512, beta=0.0, vllm="colocate", vllm_memory=0.3, sleep=True, trl="1.15") (no key in the config)`},
	} {
		flags := tc.keys["batch"] == "--batch"
		if got := settingInConfig(tc.s, tc.keys, flags); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
