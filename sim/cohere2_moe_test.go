package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Cohere 2 MoE's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): cohere2_moe-tiny.json (64 wide, 4 heads of 16, 2 kv
// heads; layer 0 dense of 96, full attention with rotary (force_rope),
// layers 1 and 2 sparse and sliding over 16 keys: 4 experts of 32, 2 a
// token, one shared, averaged; Cohere's LayerNorm; tied, logit_scale
// 0.25), 2 samples of 32 tokens, at 1, 2 and 3 layers, the experts as
// grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cohere2_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// param_bytes and grad_bytes at 3 layers: 535,552 (fp32).
func TestCohere2MoeSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "cohere2_moe-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{350_724, 660_244, 969_764}},
		{"fp32", "eager", [3]int64{398_852, 731_924, 1_064_996}},
		{"bf16", "sdpa", [3]int64{259_076, 441_620, 624_164}},
		{"bf16", "eager", [3]int64{315_396, 541_972, 768_548}},
	})
}

// The options against the same harness (fp32, sdpa, 1 to 3 layers),
// cohere2_moe-tiny.json with one key changed (written to a temporary
// file): "rms_norm_eps": 1e-05 (Llama's RMSNorm in place of Cohere's
// LayerNorm), "shared_expert_combination_strategy": "sum" (no division:
// the same bytes kept):
//
//	python tools/oracle/hf_block_saved.py /tmp/cohere2_moe-VARIANT.json {1,2,3} 2 32 float32 sdpa nocache keepfp32
func TestCohere2MoeOptionsAsTransformers(t *testing.T) {
	tiny := string(readHF(t, "cohere2_moe-tiny.json"))
	for _, tc := range []struct {
		from, to string
		saved    [3]int64
	}{
		{`"layer_norm_eps": 1e-05`, `"rms_norm_eps": 1e-05`, [3]int64{317_956, 611_092, 904_228}},
		{`"shared_expert_combination_strategy": "average"`, `"shared_expert_combination_strategy": "sum"`, [3]int64{350_724, 660_244, 969_764}},
	} {
		for i, want := range tc.saved {
			p := hfOraclePlan(t, []byte(strings.Replace(strings.Replace(tiny, tc.from, tc.to, 1), `"num_hidden_layers": 3`, `"num_hidden_layers": `+string(rune('1'+i)), 1)), hf.Options{Attn: "sdpa"}, "fp32")
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.to, i+1, got, want, got-want)
			}
		}
	}
}

// cohere2_moe under 5.6.0 is refused (the 5.12.0 wheel has
// models/cohere2_moe, 5.6.0 none); the sigmoid router and an unknown
// combination are refused naming the key; mlp_layer_types and the
// defaults are Cohere2MoeConfig's; the names are transformers'.
func TestCohere2MoeConfig(t *testing.T) {
	tiny := string(readHF(t, "cohere2_moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.6.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "cohere2_moe" needs transformers 5.12 or later`) {
		t.Errorf("transformers 5.6.0: error %v, want one naming 5.12", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"expert_selection_fn": "softmax"`, `"expert_selection_fn": "sigmoid"`, `"expert_selection_fn" = "sigmoid" is not modelled`},
		{`"expert_selection_fn": "softmax"`, `"expert_selection_fn": "relu"`, `expert_selection_fn`},
		{`"shared_expert_combination_strategy": "average"`, `"shared_expert_combination_strategy": "max"`, `shared_expert_combination_strategy`},
		{`"logit_scale": 0.25`, `"logit_scale": 0`, `logit_scale`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.to, err, tc.want)
		}
	}
	// A layer: q, o 64 x 64, k, v 64 x 32, the norm 64; dense: 3 x 64 x
	// 96; sparse: the router 4 x 64, 4 experts and a shared one of 3 x 64
	// x 32. Tied embeddings 256 x 64, the final norm 64.
	const attn, dense, sparse, rest = 2*64*64 + 2*64*32 + 64, 3 * 64 * 96, 4*64 + 5*3*64*32, 256*64 + 64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 3*attn + dense + 2*sparse + rest},
		{"mlp_layer_types", `"first_k_dense_replace": 1,`, `"first_k_dense_replace": 1, "mlp_layer_types": ["sparse", "dense", "dense"],`, 3*attn + 2*dense + sparse + rest},
		{"no dense prefix", `"first_k_dense_replace": 1,`, ``, 3*attn + 3*sparse + rest},
		{"no shared expert", `"num_shared_experts": 1`, `"num_shared_experts": 0`, 3*attn + dense + 2*(sparse-3*64*32) + rest},
	})
	checkHasParams(t, tiny, "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight",
		"model.layers.0.input_layernorm.weight", "model.norm.weight")
}
