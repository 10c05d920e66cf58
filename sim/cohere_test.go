package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Cohere's parameters on the meta device (transformers 5.25.0):
// cohere-tiny.json 90,304 (64 wide, 4 heads of 16, 2 kv heads, MLP 128,
// tied), cohere-tiny-qknorm.json 90,496 (use_qk_norm: q_norm's and
// k_norm's [heads, head_dim] weights, (4 + 2) x 16 a layer); the
// published sizes of c4ai-command-r-v01 (34,980,831,232, its card's 35
// billion) and aya-expanse-8b (8,028,033,024, as model-size tables list
// CohereForAI/aya-expanse-8b).
func TestCohereParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"cohere-tiny.json":        90_304,
		"cohere-tiny-qknorm.json": 90_496,
		"c4ai-command-r-v01.json": 34_980_831_232,
		"aya-expanse-8b.json":     8_028_033_024,
	})
}

// What Cohere's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cohere-tiny{,-qknorm}.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Cohere 2's parallel layer (its fp32 LayerNorm keeps two centred copies)
// with the rope in every layer; use_qk_norm adds each head's Cohere
// LayerNorm of q and k before it.
func TestCohereSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"cohere-tiny.json", "fp32", "sdpa", 383_492, 630_532},
		{"cohere-tiny.json", "fp32", "eager", 431_620, 726_788},
		{"cohere-tiny.json", "bf16", "sdpa", 275_460, 424_452},
		{"cohere-tiny.json", "bf16", "eager", 331_780, 537_092},
		{"cohere-tiny-qknorm.json", "fp32", "sdpa", 458_756, 781_060},
		{"cohere-tiny-qknorm.json", "fp32", "eager", 506_884, 877_316},
		{"cohere-tiny-qknorm.json", "bf16", "sdpa", 351_108, 575_748},
		{"cohere-tiny-qknorm.json", "bf16", "eager", 407_428, 688_388},
	})
}

// cohere under 4.38 is refused (Command R's cards ask for 4.39.1); the
// names are transformers' (q_norm and k_norm only with use_qk_norm).
func TestCohereConfig(t *testing.T) {
	tiny := string(readHF(t, "cohere-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.38.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "cohere" needs transformers 4.39 or later`) {
		t.Errorf("transformers 4.38.2: error %v, want one naming 4.39", err)
	}
	for _, tc := range []struct {
		file   string
		qkNorm bool
	}{{"cohere-tiny.json", false}, {"cohere-tiny-qknorm.json", true}} {
		m, err := hf.FromConfig(readHF(t, tc.file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		names := loweredParamNames(t, tinyPlan(t, m))
		for _, want := range []string{"model.layers.0.input_layernorm.weight", "model.layers.1.mlp.gate_proj.weight", "model.norm.weight"} {
			if !names[want] {
				t.Errorf("%s: no parameter %s", tc.file, want)
			}
		}
		if got := names["model.layers.0.self_attn.q_norm.weight"] && names["model.layers.0.self_attn.k_norm.weight"]; got != tc.qkNorm {
			t.Errorf("%s: q_norm and k_norm %v, want %v", tc.file, got, tc.qkNorm)
		}
	}
}
