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
// under no_grad get none). What LoRA keeps for backward on DeepSeek-V4 is
// not held here: memsh keeps more than PyTorch under any LoRA target of
// this model, o_a_proj's or not (docs/peft.md).
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
