package importers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTorchtitanPyRegistries: each model's model_registry takes its own
// arguments with its own defaults (torchtitan/models/<model>/__init__.py
// at b5bcd76c6), where memsh took llama3's for every model: qwen3's and
// deepseek_v3's moe_comm_backend was refused as an argument
// model_registry has not, and gpt_oss's attention (varlen by default)
// was said to be flex.
func TestTorchtitanPyRegistries(t *testing.T) {
	const src = "from torchtitan.models.%s import model_registry\nfrom torchtitan.components.loss import CrossEntropyLoss\nfrom torchtitan.trainer import Trainer\n\n" +
		"def f():\n    return Trainer.Config(model_spec=model_registry(%s), loss=CrossEntropyLoss.Config())\n"
	for _, tc := range []struct {
		name, model, args string
		notModelled       []string // parts of the notes, each in one
		absent            string   // a part no note has
		script            string   // a part of the script
	}{
		{name: "qwen3's DeepEP dispatch", model: "qwen3", args: `"30B-A3B", moe_comm_backend="deepep"`,
			notModelled: []string{"model_spec.moe_comm_backend: deepep (its expert-parallel dispatch's kernels and buffers"}},
		{name: "qwen3's default, None", model: "qwen3", args: `"30B-A3B"`, absent: "moe_comm_backend"},
		{name: "deepseek_v3's HybridEP, a capacity factor and MTP", model: "deepseek_v3", args: `"16B", moe_comm_backend="hybridep", non_blocking_capacity_factor=1.25, num_mtp_layers=1`,
			notModelled: []string{"model_spec.moe_comm_backend: hybridep", "model_spec.non_blocking_capacity_factor: 1.25 (each expert's rows capped",
				"model_spec.num_mtp_layers: 1 (multi-token prediction's decoder layers"}},
		{name: "deepseek_v3's standard dispatch", model: "deepseek_v3", args: `"16B", moe_comm_backend="standard"`, absent: "moe_comm_backend"},
		{name: "kimi_k2_7 positionally", model: "kimi_k2_7", args: `"moonlight_16b_a3b", "flex", "deepep"`, notModelled: []string{"model_spec.moe_comm_backend: deepep"}},
		{name: "gpt_oss: varlen by default", model: "gpt_oss", args: `"20b"`, absent: "attn_backend", script: `attn = "flash"`},
		{name: "gpt_oss: flex when asked", model: "gpt_oss", args: `"20b", attn_backend="flex"`, notModelled: []string{"model_spec.attn_backend: flex (memsh replays it as flash-attn's kernel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Import("x.py", fmt.Appendf(nil, src, tc.model, tc.args), defaults(Options{Function: "f", Model: "m.json", GPUs: 8}))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.notModelled {
				if !slices.ContainsFunc(res.NotModelled, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("want a note with %q, got %q", want, res.NotModelled)
				}
			}
			if tc.absent != "" && slices.ContainsFunc(res.NotModelled, func(n string) bool { return strings.Contains(n, tc.absent) }) {
				t.Errorf("want no note of %s, got %q", tc.absent, res.NotModelled)
			}
			if len(res.Unknown) > 0 {
				t.Errorf("not understood: %q", res.Unknown)
			}
			if !strings.Contains(res.Script, tc.script) {
				t.Errorf("want %s in\n%s", tc.script, res.Script)
			}
		})
	}
	runErrorCases(t, []errorCase{{
		name: "llama3's has no MoE dispatch", file: "x.py", opts: Options{Function: "f"},
		config: fmt.Sprintf(src, "llama3", `"8B", moe_comm_backend="deepep"`),
		want:   "x.py:6: model_registry() of llama3 has no argument moe_comm_backend (its: flavor, attn_backend, tp_gemm_backend, converters)", wantHint: "memsh reads config functions",
	}})
}
