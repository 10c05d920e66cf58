package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What A.X-K1's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, loaded by from_pretrained): axk1-tiny.json
// (64 wide, 4 heads, q latent 32, kv latent 16, nope 8, rope 4, v 12;
// layer 0 dense of 96 (first_k_dense_replace 1), layers 1 and 2 of 4
// experts of 32 in 2 groups, 2 a token, one shared, each MoE block's
// output normed by mlp.post_mlp_layernorm), 2 samples of 32 tokens, at 1,
// 2 and 3 layers, sdpa (eager is refused, as for DeepSeek-V3), the
// experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/axk1-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// The harness's kept bytes (DeepSeek-V3's router saves 2,816 B more a
// MoE layer on its selection's branch, which dies with the forward).
// param_bytes at 3 layers: 500,544 in fp32 (125,136 parameters), 251,296
// in bf16 (the two routers' 256 weights each kept fp32).
func TestAXK1SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "axk1-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{390_404, 801_556, 1_212_708}},
		{"bf16", "sdpa", [3]int64{243_460, 499_988, 756_516}},
	})
}

// The same with the experts as transformers' eager loop
// (experts_implementation "eager"), fp32:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/axk1-tiny.json {2,3} 2 32 float32 sdpa nocache keepfp32 eagerexperts
//
// keeps 931,588 and 1,472,772 bytes, less the views the loop takes of
// gate_up_proj and down_proj, which the harness counts (4 x 64 x 64 + 4 x
// 64 x 32 elements an MoE layer).
func TestAXK1EagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "axk1-tiny.json", 2, 1, 4*64*64+4*64*32, []eagerSaved{{"fp32", []int64{931_588, 1_472_772}}})
}

// The parameters: axk1-tiny.json 125,136 (the harness's fp32
// param_bytes / 4); AXK1Config()'s defaults, whose docstring names
// skt/A.X-K1, 518,983,052,288 (61 layers of 7168, 64 heads, q latent
// 1536, kv latent 512, one dense layer of 18,432, then 192 experts of
// 2048, 8 a token, one shared, 163,840 untied embeddings; the published
// config.json was not at hand), every key memsh does not ask for left
// out, on the meta device, transformers 5.25.0:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AXK1ForCausalLM(t.AXK1Config()).parameters()))"
func TestAXK1Params(t *testing.T) {
	checkParams(t, map[string]int64{"axk1-tiny.json": 125_136})
	m, err := hf.FromConfig([]byte(`{"model_type": "axk1", "architectures": ["AXK1ForCausalLM"], "vocab_size": 163840,
 "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 64}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 518_983_052_288 {
		t.Errorf("AXK1Config's defaults: %d parameters, want 518,983,052,288", got)
	}
}

// axk1 under 5.14.0 is refused (the 5.15.0 wheel is the first with
// models/axk1); a null q_lora_rank, a moe_layer_freq other than 1 and an
// mlp_layer_types that is not dense layers then sparse ones are refused;
// mlp_layer_types' leading dense layers win over first_k_dense_replace
// (AXK1Config reads the legacy key only without the list); eager
// attention is refused as for DeepSeek-V3; the names are transformers'.
func TestAXK1Config(t *testing.T) {
	tiny := string(readHF(t, "axk1-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.14.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "axk1" needs transformers 5.15 or later`) {
		t.Errorf("transformers 5.14.0: error %v, want one naming 5.15", err)
	}
	for _, tc := range []struct{ old, new, err string }{
		{`"q_lora_rank": 32`, `"q_lora_rank": null`, `"q_lora_rank" must be a positive integer (got null)`},
		{`"first_k_dense_replace": 1`, `"first_k_dense_replace": 1, "moe_layer_freq": 2`, `"moe_layer_freq" must be 1 for model_type axk1`},
		{`"first_k_dense_replace": 1`, `"mlp_layer_types": ["dense", "sparse", "dense"]`, `"mlp_layer_types" layer 2 is dense`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.old, tc.new, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.err)
		}
	}
	if _, err := hf.FromConfig([]byte(tiny), "eager"); err == nil {
		t.Error("eager: no error, want the latent attention's refusal")
	}
	twoDense := strings.Replace(tiny, `"first_k_dense_replace": 1`, `"first_k_dense_replace": 1, "mlp_layer_types": ["dense", "dense", "sparse"]`, 1)
	checkHasParams(t, twoDense, "model.layers.1.mlp.gate_proj.weight", "model.layers.2.mlp.post_mlp_layernorm.weight")
	checkHasParams(t, tiny, "model.layers.0.self_attn.q_a_proj.weight", "model.layers.0.self_attn.q_a_layernorm.weight",
		"model.layers.0.self_attn.q_b_proj.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.shared_experts.gate_proj.weight",
		"model.layers.1.mlp.post_mlp_layernorm.weight", "lm_head.weight")
}
