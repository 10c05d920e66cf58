package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// GLM's parameters on the meta device (transformers 5.25.0):
// glm-tiny.json 107,072 (glm4-tiny.json's sizes, no post-norms);
// glm-4-9b-chat-hf.json 9,399,951,360, what a loader of THUDM's
// glm-4-9b-chat prints as its trainable parameters ("9399951360 (9.4B)").
func TestGLMParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"glm-tiny.json":         107_072,
		"glm-4-9b-chat-hf.json": 9_399_951_360,
	})
}

// What GLM's decoder layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast): glm-tiny.json, 2 samples of
// 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/glm-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// GLM-4-0414's attention (half of each head rotated, adjacent pairs, the
// cos and sin repeated in every layer) and fused MLP in Llama's pre-norm
// layer.
func TestGLMSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"glm-tiny.json", "fp32", "sdpa", 414_468, 712_964},
		{"glm-tiny.json", "fp32", "eager", 446_212, 776_452},
		{"glm-tiny.json", "bf16", "sdpa", 265_988, 432_388},
		{"glm-tiny.json", "bf16", "eager", 314_116, 528_644},
	})
}

// glm under 4.45 is refused (glm-4-9b-chat-hf needs transformers 4.46);
// its layers have no post-norms, GLM-4-0414's have.
func TestGLMConfig(t *testing.T) {
	tiny := readHF(t, "glm-tiny.json")
	_, err := hf.FromConfigOptions(tiny, hf.Options{Attn: "sdpa", Transformers: "4.45.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "glm" needs transformers 4.46 or later`) {
		t.Errorf("transformers 4.45.2: error %v, want one naming 4.46", err)
	}
	for file, post := range map[string]bool{"glm-tiny.json": false, "glm4-tiny.json": true} {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		names := loweredParamNames(t, tinyPlan(t, m))
		if !names["model.layers.0.mlp.gate_up_proj.weight"] || !names["model.layers.1.self_attn.q_proj.bias"] {
			t.Errorf("%s: no gate_up_proj or q_proj bias", file)
		}
		if got := names["model.layers.0.post_self_attn_layernorm.weight"] && names["model.layers.0.post_mlp_layernorm.weight"]; got != post {
			t.Errorf("%s: post-norms %v, want %v", file, got, post)
		}
	}
}
