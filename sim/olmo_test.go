package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// OLMo's parameters on the meta device (transformers 5.25.0):
// olmo-tiny.json 106,496 (64 wide, 4 heads of 16, 2 kv heads, MLP 128,
// untied; its norms hold nothing); olmo-1b-hf.json 1,176,764,416 (2048
// wide, 16 layers, MLP 8192, vocab 50304, tied) and olmo-7b-hf.json
// 6,888,095,744 (4096 wide, 32 layers, MLP 11008, untied), the published
// sizes of allenai/OLMo-1B-hf and OLMo-7B-hf, their cards' 1B and 7B.
func TestOLMoParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"olmo-tiny.json":  106_496,
		"olmo-1b-hf.json": 1_176_764_416,
		"olmo-7b-hf.json": 6_888_095_744,
	})
}

// What OLMo's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): olmo-tiny.json, 2
// samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/olmo-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer whose norms are LayerNorms without weight or bias run in
// fp32: in bf16 each keeps its input's fp32 copy, mean and rstd.
func TestOLMoSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"olmo-tiny.json", "fp32", "sdpa", 351_748, 599_556},
		{"olmo-tiny.json", "fp32", "eager", 399_876, 695_812},
		{"olmo-tiny.json", "bf16", "sdpa", 237_060, 378_372},
		{"olmo-tiny.json", "bf16", "eager", 293_380, 491_012},
	})
}

// olmo under 4.40 is refused: 4.40.0 is the first wheel with models/olmo
// (4.37.2, 4.38.0, 4.38.2 and 4.39.3 have none);
// clip_qkv (OLMo-7B-0424's 8.0) is refused naming the key; the norms have
// no parameters.
func TestOLMoConfig(t *testing.T) {
	tiny := string(readHF(t, "olmo-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.39.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "olmo" needs transformers 4.40 or later`) {
		t.Errorf("transformers 4.39.3: error %v, want one naming 4.40", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"clip_qkv": null`, `"clip_qkv": 8.0`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"clip_qkv" is not modelled`) {
		t.Errorf("clip_qkv 8.0: error %v", err)
	}
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	for name := range loweredParamNames(t, tinyPlan(t, m)) {
		if strings.Contains(name, "layernorm") || strings.HasPrefix(name, "model.norm") {
			t.Errorf("a norm parameter %s: OlmoLayerNorm has none", name)
		}
	}
}
