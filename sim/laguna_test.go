package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Laguna's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// laguna-tiny.json (64 wide, heads of 16 over 2 kv heads, 4 / 8 / 4 query
// heads by num_attention_heads_per_layer, layers 0 and 2 sliding over 16
// keys, q and k normed per head, LagunaConfig's default rope: half of
// each head turned in the full layer, all of it in the sliding ones; a
// softplus gate a head; layer 0 dense of 96, then 8 experts of 32, 2 a
// token, a shared expert of 32, moe_routed_scaling_factor 2.5), 2
// samples of 32 tokens, at 1, 2 and 3 layers, the experts as grouped_mm
// (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/laguna-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// (the harness cuts num_attention_heads_per_layer with the layers, as
// hfSavedPlan does). param_bytes at 3 layers 757,952 (fp32), 378,976
// (bf16); grad_bytes 64 and 32 fewer: the two e_score_correction_bias
// parameters (8 each) have no gradient. gating "per-element"
// (laguna-tiny-per-element.json: g_proj heads x head_dim wide), sdpa, 2
// and 3 layers: fp32 1,039,908 / 1,500,996, bf16 639,268 / 911,684.
func TestLagunaSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "laguna-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{437_508, 947_748, 1_378_116}},
		{"fp32", "eager", [3]int64{444_676, 1_034_788, 1_472_324}},
		{"bf16", "sdpa", [3]int64{271_108, 570_148, 819_524}},
		{"bf16", "eager", [3]int64{306_948, 710_436, 995_652}},
	})
	for _, tc := range []struct {
		precision string
		want      [2]int64
	}{{"fp32", [2]int64{1_039_908, 1_500_996}}, {"bf16", [2]int64{639_268, 911_684}}} {
		for i, want := range tc.want {
			if got := graniteSaved(t, "laguna-tiny-per-element.json", i+2, tc.precision, "sdpa", false); got != want {
				t.Errorf("per-element %s sdpa, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, i+2, got, want, got-want)
			}
		}
	}
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 757_952, 757_888}, {"bf16", 378_976, 378_944}} {
		r := evalPlan(t, hfSavedPlan(t, "laguna-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// The same with the experts as transformers' eager loop, sdpa, 2 and 3
// layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/laguna-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 eagerexperts
//
// fp32 1,176,068 / 1,834,756, bf16 683,780 / 1,046,788, less the views
// the loop takes of gate_up_proj and down_proj for experts e > 0 in each
// MoE layer, which the harness counts (8 x 64 x 64 + 8 x 64 x 32
// elements; TestFlexOlmoExpertsAsTransformers).
func TestLagunaEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "laguna-tiny.json", 2, 1, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{1_176_068, 1_834_756}},
		{"bf16", []int64{683_780, 1_046_788}},
	})
}

// laguna under 5.6.0 is refused (models/laguna came with 5.7); the
// parameter counts of variants of the tiny file are transformers 5.25.0's
// on the meta device (LagunaForCausalLM built from the edited config):
//
//	file 189,488; attention_bias 190,128; gating "per-element" or false
//	204,848; without num_attention_heads_per_layer (4 heads each)
//	181,040; mlp_layer_types all "sparse" 226,872; without layer_types
//	(all full attention) 189,488
//
// moe_router_logit_softcapping above 0 and moe_apply_router_weight_on_input
// are refused, and so are a malformed gating, heads list or
// rope_parameters; the names are transformers'.
func TestLagunaConfig(t *testing.T) {
	tiny := string(readHF(t, "laguna-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.6.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "laguna" needs transformers 5.7 or later`) {
		t.Errorf("transformers 5.6.0: error %v, want one naming 5.7", err)
	}
	const end = `"tie_word_embeddings": false`
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 189_488},
		{"attention_bias", end, end + `, "attention_bias": true`, 190_128},
		{"per-element", `"gating": true`, `"gating": "per-element"`, 204_848},
		{"gating false", `"gating": true`, `"gating": false`, 204_848},
		{"heads default", `"num_attention_heads_per_layer": [4, 8, 4],`, ``, 181_040},
		{"all sparse", end, end + `, "mlp_layer_types": ["sparse", "sparse", "sparse"]`, 226_872},
		{"no layer_types", `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"],`, ``, 189_488},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"softcapping", end, end + `, "moe_router_logit_softcapping": 30.0`, "moe_router_logit_softcapping"},
		{"router weight on input", end, end + `, "moe_apply_router_weight_on_input": true`, "moe_apply_router_weight_on_input"},
		{"gating", `"gating": true`, `"gating": "per-token"`, "gating"},
		{"short heads list", `[4, 8, 4]`, `[4, 8]`, "num_attention_heads_per_layer"},
		{"heads not dividing kv", `[4, 8, 4]`, `[4, 7, 4]`, "7"},
		{"flat rope_parameters", end, end + `, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}`, "rope_parameters"},
		{"top-k past the experts", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 9`, "num_experts_per_tok"},
	})
	// laguna-xs2.json: Laguna XS.2's sizes as a public MLX adapter's test
	// fixture writes its config.json (40 layers of 2048, heads of 128 over
	// 8 kv heads, 48 query heads in the full layers (every fourth, from
	// 0) and 64 in the 30 sliding ones over 512 keys, layer 0 dense of
	// 8192, then 256 experts of 512, 8 a token, a shared expert of 512;
	// 100,352 untied embeddings; LagunaConfig's own defaults):
	// 33,442,617,088, transformers 5.25.0's count on the meta device. The
	// hub's config.json itself is not in the stored sources.
	m, err := hf.FromConfig(readHF(t, "laguna-xs2.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 33_442_617_088 {
		t.Errorf("Laguna XS.2: %d parameters, want 33,442,617,088", got)
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.g_proj.weight", "model.layers.1.self_attn.q_norm.weight",
		"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.gate.e_score_correction_bias",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight", "lm_head.weight")
}

// Under transformers 5.17.0 (the wheel unzipped on PYTHONPATH with
// TestHYV3Transformers517's packages beside it), sdpa, 2 and 3 layers:
//
//	PYTHONPATH=tf5.17.0:deps python tools/oracle/hf_block_saved.py sim/testdata/hf/laguna-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// fp32 947,876 / 1,378,372, bf16 570,276 / 819,780: 128 B a MoE layer
// more than 5.25.0, the [tokens x top-k] sentinel mask 5.0 to 5.17's
// grouped_mm makes whether or not the experts are sharded
// (nn.MoE.SentinelsEP).
func TestLagunaTransformers517(t *testing.T) {
	for _, tc := range []struct {
		precision string
		want      [2]int64
	}{{"fp32", [2]int64{947_876, 1_378_372}}, {"bf16", [2]int64{570_276, 819_780}}} {
		for i, want := range tc.want {
			r := evalPlan(t, hfSavedPlan(t, "laguna-tiny.json", i+2, tc.precision, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, false))
			if got := r.SavedActivations + r.SavedWeightCopies; got != want {
				t.Errorf("5.17.0 %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, i+2, got, want, got-want)
			}
		}
	}
}
