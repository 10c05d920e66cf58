package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Arcee's tiny model's parameters: 106,816, which transformers 5.25.0
// counts on the meta device for arcee-tiny.json (64 wide, 4 heads of 16,
// 2 kv heads, an ungated MLP of 192, untied).
func TestArceeParams(t *testing.T) {
	checkParams(t, map[string]int64{"arcee-tiny.json": 106_816})
}

// What Arcee's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): arcee-tiny.json, 2
// samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/arcee-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's attention; the MLP keeps up_proj's input, relu's output (which
// torch.square reads: one tensor) and the square's output for down_proj.
func TestArceeSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"arcee-tiny.json", "fp32", "sdpa", 367_364, 614_660},
		{"arcee-tiny.json", "fp32", "eager", 415_492, 710_916},
		{"arcee-tiny.json", "bf16", "sdpa", 242_436, 383_236},
		{"arcee-tiny.json", "bf16", "eager", 298_756, 495_876},
	})
}

// arcee under 4.52.4 is refused (models/arcee came with 4.53); mlp_bias
// biases both projections; the names are transformers' (no gate_proj).
func TestArceeConfig(t *testing.T) {
	tiny := string(readHF(t, "arcee-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.52.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "arcee" needs transformers 4.53 or later`) {
		t.Errorf("transformers 4.52.4: error %v, want one naming 4.53", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"mlp_bias": false`, `"mlp_bias": true`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(106_816+2*(192+64)); got != want {
		t.Errorf("mlp_bias: %d parameters, want %d", got, want)
	}
	m, err = hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight", "lm_head.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
	if names["model.layers.0.mlp.gate_proj.weight"] {
		t.Error("a gate_proj: Arcee's MLP has none")
	}
}
