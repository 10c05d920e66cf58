package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Apertus's tiny model's parameters: 106,884, which transformers 5.25.0
// counts on the meta device for apertus-tiny.json (64 wide, 4 heads of
// 16, 2 kv heads, per-head q and k norms, an ungated MLP of 192 with
// xIELU's two scalars a layer, untied).
func TestApertusParams(t *testing.T) {
	checkParams(t, map[string]int64{"apertus-tiny.json": 106_884})
}

// What Apertus's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast; xIELU's Python path, the
// xielu CUDA wheel not installed): apertus-tiny.json, 2 samples of 32
// tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/apertus-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// xIELU keeps up_proj's output, alpha_p * x, expm1's output, the
// difference, the bool condition and four scalars (softplus(alpha_p),
// alpha_n, beta, eps) a layer (nn/xielu.go).
func TestApertusSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"apertus-tiny.json", "fp32", "sdpa", 577_812, 1_035_556},
		{"apertus-tiny.json", "fp32", "eager", 625_940, 1_131_812},
		{"apertus-tiny.json", "bf16", "sdpa", 366_860, 632_084},
		{"apertus-tiny.json", "bf16", "eager", 423_180, 744_724},
	})
}

// apertus under 4.55.4 is refused (models/apertus came with 4.56); the
// names are transformers' (attention_layernorm, feedforward_layernorm,
// act_fn's scalars).
func TestApertusConfig(t *testing.T) {
	tiny := string(readHF(t, "apertus-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.55.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "apertus" needs transformers 4.56 or later`) {
		t.Errorf("transformers 4.55.4: error %v, want one naming 4.56", err)
	}
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.attention_layernorm.weight", "model.layers.0.feedforward_layernorm.weight",
		"model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.act_fn.alpha_p", "model.layers.1.mlp.act_fn.alpha_n",
		"model.layers.0.self_attn.q_norm.weight", "lm_head.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}
