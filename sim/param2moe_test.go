package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Param2 MoE's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, loaded by from_pretrained):
// param2moe-tiny.json (Param2MoeConfig, built as Glm4MoeForCausalLM; 64
// wide, 4 heads of 16, 2 kv heads, no biases; from the class's defaults
// per-head q and k norms, the whole head rotated, two shared experts and a
// tied head; layer 0 dense of 96, layers 1 and 2 of 4 experts (num_experts)
// of 32, 2 a token), 2 samples of 32 tokens, at 1, 2 and 3 layers, the
// experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/param2moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// param_bytes and grad_bytes at 3 layers: 553,088 in fp32 (138,272
// parameters, the head tied), 277,568 in bf16 (the two routers' 512
// weights kept fp32).
func TestParam2MoeSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "param2moe-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{401_668, 820_756, 1_239_844}},
		{"fp32", "eager", [3]int64{433_412, 884_244, 1_335_076}},
		{"bf16", "sdpa", [3]int64{256_260, 515_604, 774_948}},
		{"bf16", "eager", [3]int64{304_388, 611_860, 919_332}},
	})
}

// The parameters: param2moe-tiny.json 138,272 (transformers 5.25.0
// builds it so); Param2MoeConfig()'s defaults 17,151,124,096 on the meta
// device, transformers 5.25.0:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.Param2MoeConfig()).parameters()))"
func TestParam2MoeParams(t *testing.T) {
	checkParams(t, map[string]int64{"param2moe-tiny.json": 138_272})
	m, err := hf.FromConfig([]byte(`{"model_type": "param2moe", "vocab_size": 128000, "hidden_size": 2048,
 "intermediate_size": 9216, "num_hidden_layers": 21, "num_attention_heads": 32, "num_key_value_heads": 8,
 "moe_intermediate_size": 2048, "num_experts_per_tok": 6}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 17_151_124_096 {
		t.Errorf("Param2MoeConfig's defaults: %d parameters, want 17,151,124,096", got)
	}
}

// param2moe under 5.24.0 is refused (the 5.25.0 wheel is the first with
// models/param2moe); a key under both its names is refused naming
// Param2MoeConfig; the names are transformers' (Glm4MoeForCausalLM's,
// the head tied to embed_tokens).
func TestParam2MoeConfig(t *testing.T) {
	tiny := string(readHF(t, "param2moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.24.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "param2moe" needs transformers 5.25 or later`) {
		t.Errorf("transformers 5.24.0: error %v, want one naming 5.25", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"num_experts": 4,`, `"num_experts": 4, "num_local_experts": 4,`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), "Param2MoeConfig reads") {
		t.Errorf("num_experts and num_local_experts: error %v, want one naming Param2MoeConfig", err)
	}
	checkHasParams(t, tiny, "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.down_proj",
		"model.layers.2.mlp.shared_experts.up_proj.weight", "model.layers.0.self_attn.k_norm.weight")
}
