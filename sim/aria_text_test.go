package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Aria's text model (AriaTextForCausalLM, transformers 5.25.0, meta
// device): aria-text-tiny.json (64 wide, 4 layers, 4 heads, 2 kv heads,
// 4 experts of 32 (2 a token), 2 shared, vocab 256, untied) builds
// 230,976 parameters; aria-text-defaults.json, AriaTextConfig's defaults
// (4096 wide, intermediate 4096, 32 layers of 32 heads, 8 experts, 2 a
// token, 2 shared, vocab 32,000, untied: the sizes written out, memsh
// reading no default for them) 18,517,069,824. No released config.json
// of rhymes-ai/Aria was reachable from here to check its total.
func TestAriaTextParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"aria-text-tiny.json":     230_976,
		"aria-text-defaults.json": 18_517_069_824,
	})
}

// What Aria's text layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, the experts on grouped_mm, its
// default): aria-text-tiny.json, 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/aria-text-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's attention and norms, the router's top-k over its logits and
// the softmax over the k, the grouped_mm experts (stored transposed:
// nothing more kept) and the shared MLP of 2 x 32.
func TestAriaTextSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [3]int64
	}{
		{"fp32", "sdpa", [3]int64{470_804, 821_540, 1_172_276}},
		{"fp32", "eager", [3]int64{518_932, 917_796, 1_316_660}},
		{"bf16", "sdpa", [3]int64{296_212, 490_788, 685_364}},
		{"bf16", "eager", [3]int64{352_532, 603_428, 854_324}},
	} {
		for i, want := range tc.saved {
			if got := hfSaved(t, "aria-text-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn}, false); got != want {
				t.Errorf("%s %s, %d layers: %d saved, want %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// aria_text before 5.18 is refused (its experts were
// AriaGroupedExpertsGemm until 5.17); a hidden_act other than silu is
// refused (the routed experts are always SiLU-gated, the shared ones
// follow hidden_act); mlp_bias biases the shared MLP's three projections
// alone (gate_proj's and up_proj's 64 and down_proj's 64 a layer:
// transformers 5.25.0 builds 231,744 for the tiny file with mlp_bias
// true, 232,512 with attention_bias true as well).
func TestAriaTextConfig(t *testing.T) {
	tiny := string(readHF(t, "aria-text-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "aria_text" needs transformers 5.18 or later`) {
		t.Errorf("transformers 5.17.0: error %v, want one naming 5.18", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"hidden_act": "silu"`, `"hidden_act": "gelu"`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"hidden_act" "gelu" is not modelled for Aria`) {
		t.Errorf("hidden_act gelu: error %v", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"hidden_act": "silu"`, `"hidden_act": "silu", "mlp_bias": true`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 231_744 {
		t.Errorf("mlp_bias: %d parameters, want 231,744", got)
	}
}
