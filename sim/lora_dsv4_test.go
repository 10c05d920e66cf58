package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// PEFT's LoRA all-linear (r=4, alpha=8, fp32 adapters) on DeepSeek-V4
// adapts o_a_proj, an nn.Linear subclass whose forward is a bmm over the
// o_groups groups (DeepseekV4GroupedLinear, transformers 5.25.0).
// lora.Linear's update is o_groups times too wide for the module's output
// per group, so with deepseek-v4-tiny.json's 2 groups PEFT's first
// forward fails, and memsh refuses (nn/dsv4_attention.go, oaLoRA):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v4-tiny.json 2 2 32 float32 eager nocache lora=all-linear
//	RuntimeError: The size of tensor a (16) must match the size of tensor b (32) at non-singleton dimension 3
//
// With o_groups 1 (the same file, o_groups set to 1) the shapes agree:
//
//	python tools/oracle/hf_block_saved.py /tmp/dsv4_g1.json 2 2 32 float32 eager nocache lora=all-linear
//
// parameters 605,668 B, gradients 31,744 (the adapters the forward runs
// under no_grad get none); what it keeps: TestLoRADeepSeekV4SavesAsPEFT.
func TestLoRADeepSeekV4AsPEFT(t *testing.T) {
	lora := &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
	p := hfOraclePlan(t, ropeConfig(t, "deepseek-v4-tiny.json", 2, nil), hf.Options{Attn: "eager"}, "fp32")
	p.LoRA = lora
	if _, err := p.LowerProgram(); err == nil || !strings.Contains(err.Error(), "o_a_proj") || !strings.Contains(err.Error(), "its forward fails") {
		t.Errorf("o_groups 2: %v, want o_a_proj's adapter refused", err)
	}
	p = hfOraclePlan(t, ropeConfig(t, "deepseek-v4-tiny.json", 2, map[string]any{"o_groups": 1}), hf.Options{Attn: "eager"}, "fp32")
	p.LoRA = lora
	r := evalPlan(t, p)
	if got := [2]int64{r.States.Params, r.States.Grads}; got != [2]int64{605668, 31744} {
		t.Errorf("o_groups 1: parameters and gradients %v bytes, PEFT [605668 31744]", got)
	}
}

// What DeepSeek-V4 keeps for backward under PEFT's LoRA (r=4, alpha=8,
// fp32 adapters): the base frozen, the streams entering the first layer
// and its attention's hyper weights need no gradient, so the products
// there keep only the factor the other side's gradient needs (nn's
// saveProduct: the hyper-connections' mixes and post ⊗ y, the eager
// attention's q·k and p·v). deepseek-v4-tiny.json cut to 2 layers, 2
// samples of 32 tokens, eager, against transformers 5.25.0, peft 0.21.2,
// PyTorch 2.15.0 on the CPU (kept; the harness counts three 12-byte views
// of the hyper-connections' scale parameters besides, which memsh does
// not: TestDeepSeekV4SavesAsTransformers):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v4-tiny.json 2 2 32 float32 eager nocache keepfp32 v lora=kv_proj
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v4-tiny.json 2 2 32 {float32,bfloat16} eager nocache keepfp32 v lora=o_b_proj
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deepseek-v4-tiny.json 2 2 32 float32 eager nocache keepfp32 v lora=q_a_proj,q_b_proj,kv_proj,o_b_proj,gate_proj,up_proj,down_proj
//	python tools/oracle/hf_block_saved.py /tmp/dsv4_g1.json 2 2 32 {float32,bfloat16} eager nocache keepfp32 v lora=all-linear
//
// (/tmp/dsv4_g1.json: the same file with o_groups 1, where PEFT's forward
// runs.)
func TestLoRADeepSeekV4SavesAsPEFT(t *testing.T) {
	const views = 3 * 12
	for _, tc := range []struct {
		groups              int
		precision, targets  string
		kept, params, grads int64
	}{
		{2, "fp32", "kv_proj", 1778568, 583076, 5120},
		{2, "fp32", "o_b_proj", 1647240, 579492, 3072},
		{2, "bf16", "o_b_proj", 1563016, 344484, 3072},
		{2, "fp32", "q_a_proj,q_b_proj,kv_proj,o_b_proj,gate_proj,up_proj,down_proj", 1950856, 608676, 27648},
		{1, "fp32", "all-linear", 2010248, 605668, 31744},
		{1, "bf16", "all-linear", 2005384, 374756, 31744},
	} {
		p := hfOraclePlan(t, ropeConfig(t, "deepseek-v4-tiny.json", 2, map[string]any{"o_groups": tc.groups}), hf.Options{Attn: "eager"}, tc.precision)
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: strings.Split(tc.targets, ",")}
		r := evalPlan(t, p)
		if want := tc.kept - views; r.SavedActivations != want {
			t.Errorf("o_groups %d, %s, %s: memsh keeps %d bytes, PEFT %d less the views, %d (%+d)", tc.groups, tc.precision, tc.targets, r.SavedActivations, tc.kept, want, r.SavedActivations-want)
		}
		if got := [2]int64{r.States.Params, r.States.Grads}; got != [2]int64{tc.params, tc.grads} {
			t.Errorf("o_groups %d, %s, %s: parameters and gradients %v bytes, PEFT [%d %d]", tc.groups, tc.precision, tc.targets, got, tc.params, tc.grads)
		}
	}
}
