package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What FlexOlmo's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// flex_olmo-tiny.json (64 wide, 4 heads of 16, 2 kv heads; 8 experts of
// 32, 2 a token, not renormalised; untied), 2 samples of 32 tokens, at 1,
// 2 and 3 layers, the experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/flex_olmo-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// param_bytes and grad_bytes at 3 layers: 877,440 (fp32), 438,720 (bf16).
func TestFlexOlmoSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "flex_olmo-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{456_484, 792_900, 1_129_316}},
		{"fp32", "eager", [3]int64{504_612, 889_156, 1_273_700}},
		{"bf16", "sdpa", [3]int64{341_540, 571_204, 800_868}},
		{"bf16", "eager", [3]int64{397_860, 683_844, 969_828}},
	})
	for _, tc := range []struct {
		precision string
		want      int64
	}{{"fp32", 877_440}, {"bf16", 438_720}} {
		r := evalPlan(t, hfSavedPlan(t, "flex_olmo-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.want || r.States.Grads != tc.want {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d", tc.precision, r.States.Params, r.States.Grads, tc.want)
		}
	}
}

// The same with the experts as transformers' eager loop, sdpa:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/flex_olmo-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 eagerexperts
//
// less the views the loop takes of gate_up_proj and down_proj for experts
// e > 0, which the harness counts (8 x 64 x 64 + 8 x 64 x 32 elements a
// layer; TestLongcatFlashSavesAsTransformers); and transformers 4.57.1's
// FlexOlmo (its sparse block OLMoE's, nn.Linear experts in a loop), sdpa:
//
//	PYTHONPATH=DIR python tools/oracle/hf_block_saved.py sim/testdata/hf/flex_olmo-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// with DIR the 4.57.1 wheel unzipped, requests, huggingface_hub 0.36.0
// and tokenizers 0.22.1 beside it. Without an attention_mask 4.57.1 hands
// SDPA a [2, 1, 32, 32] mask and k and v repeated to 4 heads
// (TestNoCacheMaskAsTransformers): 24,576 B a layer more in fp32 than
// 5.25.0 would keep with the same loop.
func TestFlexOlmoExpertsAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, experts, transformers string
		bytes                            int64
		saved                            [3]int64
	}{
		{"fp32", "eager", "", 4, [3]int64{684_804, 1_249_540, 1_814_276}},
		{"bf16", "eager", "", 2, [3]int64{455_172, 798_468, 1_141_764}},
		{"fp32", "", "4.57.1", 0, [3]int64{512_772, 905_476, 1_298_180}},
		{"bf16", "", "4.57.1", 0, [3]int64{369_156, 626_436, 883_716}},
	} {
		for i, saved := range tc.saved {
			want := saved - int64(i+1)*(8*64*64+8*64*32)*tc.bytes
			p := hfSavedPlan(t, "flex_olmo-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa", Experts: tc.experts, Transformers: tc.transformers}, false)
			p.NoAttentionMask = true // the harness passes none: 4.57.1 builds SDPA a mask and repeats k and v (nn.Attention.NoCacheMask)
			got := evalPlan(t, p).SavedActivations
			if got != want {
				t.Errorf("%s %s%s, %d layers: memsh keeps %d bytes, transformers %d, %d without the parameter views (%+d)", tc.precision, tc.experts, tc.transformers, i+1, got, saved, want, got-want)
			}
		}
	}
}

// flex_olmo under 4.56.2 is refused (models/flex_olmo came with 4.57);
// num_local_experts reads as num_experts (FlexOlmoConfig.attribute_map),
// the defaults are FlexOlmoConfig's (7 experts, 5 a token); a top-k past
// the experts is refused naming the key; the names are transformers'.
func TestFlexOlmoConfig(t *testing.T) {
	tiny := string(readHF(t, "flex_olmo-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.56.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "flex_olmo" needs transformers 4.57 or later`) {
		t.Errorf("transformers 4.56.2: error %v, want one naming 4.57", err)
	}
	// A layer: q, o 64 x 64, k, v 64 x 32, q_norm 64, k_norm 32, two
	// norms of 64, the router E x 64, E experts of 3 x 64 x 32.
	layer := func(experts int64) int64 { return 2*64*64 + 2*64*32 + 64 + 32 + 2*64 + experts*64 + experts*3*64*32 }
	const rest = 2*256*64 + 64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 3*layer(8) + rest},
		{"num_local_experts", `"num_experts": 8`, `"num_local_experts": 8`, 3*layer(8) + rest},
		{"FlexOlmoConfig's 7 experts", `"num_experts": 8,`, ``, 3*layer(7) + rest},
	})
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"num_experts_per_tok": 2`, `"num_experts_per_tok": 9`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), "num_experts_per_tok") {
		t.Errorf("num_experts_per_tok 9: error %v, want one naming the key", err)
	}
	checkHasParams(t, tiny, "model.layers.0.self_attn.q_norm.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.2.mlp.experts.gate_up_proj", "model.layers.0.post_feedforward_layernorm.weight", "lm_head.weight")
}
