package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Flint's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// flint-tiny.json (64 wide, 4 query heads of 16 over 2 kv heads, q and
// k normed per head; layer_types: layer 1 sliding over 16 keys with the
// rotary embedding, layers 0 and 2 full without one; a sink a head
// everywhere; mlp_only_layers [0]: layer 0 dense of 96, then 4 experts of
// 32, 2 a token, behind the fp32 sigmoid router, and an ungated shared
// expert of 48), 2 samples of 32 tokens, at 1, 2 and 3 layers, eager
// (FlintPreTrainedModel has no SDPA path), the experts as grouped_mm
// (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/flint-tiny.json {1,2,3} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// kept (= saved): fp32 430,340 / 869,908 / 1,305,380, bf16 356,612 /
// 704,020 / 1,049,380. The scores are fp32 products of q and k cast to
// fp32 (the copies saved in bf16), the softmax runs over them and the
// sink column with no row max, and its output less the sink column is
// cast to v's dtype (a bf16 [.., 32, 32] copy the P.V matmul saves).
// param_bytes and grad_bytes at 3 layers 561,328 (fp32) and 281,712
// (bf16: the two routers' weights and the three layers' sinks kept fp32,
// 1,048 bytes more than 140,332 x 2).
func TestFlintSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "flint-tiny.json", []savedDepths{
		{"fp32", "eager", [3]int64{430_340, 869_908, 1_305_380}},
		{"bf16", "eager", [3]int64{356_612, 704_020, 1_049_380}},
	})
	// attn="sdpa" runs eager, as transformers' default load does.
	if got := graniteSaved(t, "flint-tiny.json", 3, "bf16", "sdpa", false); got != 1_049_380 {
		t.Errorf("bf16 sdpa, 3 layers: memsh keeps %d bytes, want eager's 1,049,380", got)
	}
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 561_328, 561_328}, {"bf16", 281_712, 281_712}} {
		r := evalPlan(t, hfSavedPlan(t, "flint-tiny.json", 3, tc.precision, hf.Options{Attn: "eager"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// The same with the experts as transformers' eager loop, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/flint-tiny.json {2,3} 2 32 {float32,bfloat16} eager nocache keepfp32 eagerexperts
//
// kept (= saved): fp32 999,940 / 1,565,444, bf16 768,516 / 1,178,372,
// less the views the loop takes of gate_up_proj and down_proj in each MoE
// layer, which the harness counts (4 x 64 x 64 + 4 x 64 x 32 elements;
// TestFlexOlmoExpertsAsTransformers). attn="sdpa" runs eager.
func TestFlintEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "flint-tiny.json", 2, 1, 4*64*64+4*64*32, []eagerSaved{
		{"fp32", []int64{999_940, 1_565_444}},
		{"bf16", []int64{768_516, 1_178_372}},
	})
}

// flint under 5.20.0 is refused (models/flint came with 5.21.0: absent
// from the 5.20.0 wheel, present in 5.21.0's; unzip -l), and so is
// attn="flash" (FlashAttention 3 from vLLM's kernels and FlashAttention 4
// alone are compatible). The parameter counts of variants of the tiny
// file are transformers 5.25.0's on the meta device (FlintForCausalLM
// built from FlintConfig of the edited keys):
//
//	file 140,332; attention_bias 140,908 (q, k, v and o_proj);
//	mlp_only_layers left out ([0, 1]) 124,716; layer_types left out (all
//	full at 3 layers) 140,332; decoder_sparse_step 2 124,716; tied
//	132,140; shared_expert_intermediate_size 16 128,044
//
// FlintConfig's defaults (its docstring's checkpoint, RecursiveSI/flint;
// flint-defaults.json writes them out) build 39,785,287,456 parameters,
// transformers 5.25.0's count on the meta device of FlintConfig(). The
// hub's config.json is not in the stored sources.
func TestFlintConfig(t *testing.T) {
	tiny := string(readHF(t, "flint-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "5.20.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "flint" needs transformers 5.21 or later`) {
		t.Errorf("transformers 5.20.0: error %v, want one naming 5.21", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "5.21.0"}); err != nil {
		t.Errorf("transformers 5.21.0: %v", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err == nil || !strings.Contains(err.Error(), "no flash-attention path") {
		t.Errorf("flash: error %v, want a refusal", err)
	}
	const end = `"tie_word_embeddings": false`
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 140_332},
		{"attention_bias", end, end + `, "attention_bias": true`, 140_908},
		{"mlp_only_layers left out", `"mlp_only_layers": [0],`, "", 124_716},
		{"layer_types left out", `"layer_types": ["full_attention", "sliding_attention", "full_attention"],`, "", 140_332},
		{"decoder_sparse_step 2", end, end + `, "decoder_sparse_step": 2`, 124_716},
		{"tied", end, `"tie_word_embeddings": true`, 132_140},
		{"shared 16", `"shared_expert_intermediate_size": 48`, `"shared_expert_intermediate_size": 16`, 128_044},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"layer_types", `"sliding_attention", "full_attention"]`, `"chunked_attention", "full_attention"]`, "layer_types"},
		{"layer_types too short", `["full_attention", "sliding_attention", "full_attention"]`, `["full_attention"]`, "layer_types"},
		{"mlp_only_layers past the layers", `"mlp_only_layers": [0]`, `"mlp_only_layers": [0, 7]`, "mlp_only_layers"},
		{"top-k past the experts", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 5`, "num_experts_per_tok"},
	})
	d, err := hf.FromConfig(readHF(t, "flint-defaults.json"), "eager")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Params(); got != 39_785_287_456 {
		t.Errorf("FlintConfig's defaults: %d parameters, want 39,785,287,456", got)
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_norm.weight",
		"model.layers.1.self_attn.sinks", "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.shared_expert.down_proj.weight", "model.norm.weight", "lm_head.weight")
}
