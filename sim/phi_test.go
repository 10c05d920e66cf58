package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Phi's parameters on the meta device (transformers 5.25.0): phi-tiny.json
// 132,864 (64 wide, 4 heads of 16, MLP 256, untied, lm_head biased);
// phi-2.json 2,779,683,840 and phi-1_5.json 1,418,270,720, the published
// config.json files' sizes (Phi-2: 2560 wide, 32 layers, MLP 10240,
// partial_rotary_factor 0.4; Phi-1.5: 2048, 24, 8192, 0.5; vocab 51200).
func TestPhiParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"phi-tiny.json": 132_864,
		"phi-2.json":    2_779_683_840,
		"phi-1_5.json":  1_418_270_720,
	})
}

// What Phi's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): phi-tiny.json, 2
// samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/phi-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// one LayerNorm feeding the attention (a rotated 40% of each head, the
// rest cat back) and the gelu_new MLP side by side.
func TestPhiSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"phi-tiny.json", "fp32", "sdpa", 545_284, 989_188},
		{"phi-tiny.json", "fp32", "eager", 560_644, 1_019_908},
		{"phi-tiny.json", "bf16", "sdpa", 306_436, 528_900},
		{"phi-tiny.json", "bf16", "eager", 346_372, 608_772},
	})
}

// With embd_pdrop, attention_dropout and resid_pdrop 0.1
// (phi-tiny-dropout.json), eager, as above: fp32 675,332 / 1,232,900, bf16
// 387,332 / 682,500 on the CPU, whose dropout keeps a noise tensor in the
// input's dtype where CUDA's keeps a bool mask (checkCPUDropout): a layer's
// masks are the probabilities' (2 x 4 heads x 32 x 32) and both branches'
// outputs (2 x 2 x 32 x 64), the embeddings' once (2 x 32 x 64).
func TestPhiDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "phi-tiny-dropout.json", 8192+2*4096, 4096, []cpuDropout{
		{"fp32", 4, 675_332, 1_232_900},
		{"bf16", 2, 387_332, 682_500},
	})
}

// phi under 4.36 is refused; qk_layernorm is refused naming the key; the
// names are transformers' (dense, fc1, fc2, final_layernorm, lm_head's
// bias).
func TestPhiConfig(t *testing.T) {
	tiny := string(readHF(t, "phi-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.36.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "phi" needs transformers 4.37 or later`) {
		t.Errorf("transformers 4.36.2: error %v, want one naming 4.37", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"qk_layernorm": false`, `"qk_layernorm": true`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"qk_layernorm" is not modelled yet`) {
		t.Errorf("qk_layernorm: error %v", err)
	}
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.self_attn.dense.bias", "model.layers.1.mlp.fc1.weight", "model.layers.1.mlp.fc2.bias",
		"model.layers.0.input_layernorm.bias", "model.final_layernorm.weight", "lm_head.bias"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}
