package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// What MiMo-V2-Flash's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): mimo_v2_flash-tiny.json (64 wide, 4 query heads of 48
// over 1 kv head, 2 in the sliding layers, v heads of 32, v times 0.707;
// MiMoV2FlashConfig's layer_types: layer 0 full attention, layers 1 and
// 2 sliding over 16 keys with a sink a head; 0.334 of each head turned,
// 16 of 48 dims; layer 0 dense of 96, then 4 experts of 32, 2 a token, no
// shared expert), 2 samples of 32 tokens, at 1, 2 and 3 layers, eager
// (MiMoV2FlashPreTrainedModel has no SDPA path), the experts as
// grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mimo_v2_flash-tiny.json {1,2,3} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// kept: fp32 483,076 / 923,156 / 1,359,140, bf16 284,420 / 533,524 /
// 780,580 (saved: 1,792 bytes more a MoE layer, the router's group
// top-k on a branch the loss does not reach, which dies with the
// forward). Every layer keeps the int64 indices of its scores' row max
// (subtracted in the full layer too), each sliding layer's softmax one
// column wider (the sink's); the full layer's softmax runs in the
// scores' dtype; v's product by attention_value_scale saves nothing.
// param_bytes and grad_bytes at 3 layers 687,904 (fp32) and 344,976
// (bf16: the two routers' weights kept fp32, 1,024 bytes more than
// 171,976 x 2).
func TestMiMoV2FlashSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "mimo_v2_flash-tiny.json", []savedDepths{
		{"fp32", "eager", [3]int64{483_076, 923_156, 1_359_140}},
		{"bf16", "eager", [3]int64{284_420, 533_524, 780_580}},
	})
	// attn="sdpa" runs eager, as transformers' default load does.
	if got := graniteSaved(t, "mimo_v2_flash-tiny.json", 3, "bf16", "sdpa", false); got != 780_580 {
		t.Errorf("bf16 sdpa, 3 layers: memsh keeps %d bytes, want eager's 780,580", got)
	}
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 687_904, 687_904}, {"bf16", 344_976, 344_976}} {
		r := evalPlan(t, hfSavedPlan(t, "mimo_v2_flash-tiny.json", 3, tc.precision, hf.Options{Attn: "eager"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// The same with the experts as transformers' eager loop, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mimo_v2_flash-tiny.json {2,3} 2 32 {float32,bfloat16} eager nocache keepfp32 eagerexperts
//
// kept: fp32 1,053,188 / 1,619,204, bf16 598,020 / 909,572 (saved 1,792
// bytes more a MoE layer, as above), less the views the loop
// takes of gate_up_proj and down_proj in each MoE layer, which the
// harness counts (4 x 64 x 64 + 4 x 64 x 32 elements;
// TestFlexOlmoExpertsAsTransformers).
func TestMiMoV2FlashEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "mimo_v2_flash-tiny.json", 2, 1, 4*64*64+4*64*32, []eagerSaved{
		{"fp32", []int64{1_053_188, 1_619_204}},
		{"bf16", []int64{598_020, 909_572}},
	})
}

// mimo_v2_flash under 5.12.1 is refused (models/mimo_v2_flash came with
// 5.13.0: absent from the 5.12.1 wheel, present in 5.13.0's; unzip -l),
// and so is attn="flash" (only FlashAttention 4 is compatible). The
// parameter counts of variants of the tiny file are transformers
// 5.25.0's on the meta device (MiMoV2FlashForCausalLM built from the
// edited config):
//
//	file 171,976; attention_bias 172,952 (q, k and v, never o_proj);
//	mlp_layer_types all "sparse" 178,376; layer_types all full 161,728,
//	all sliding 177,100 (twice the kv heads, a sink a head); v_head_dim
//	48 189,384
//
// MiMoV2FlashConfig's defaults (its docstring's checkpoint,
// XiaomiMiMo/MiMo-V2-Flash; mimo_v2_flash-defaults.json writes them out)
// build 308,778,768,832 parameters, transformers 5.25.0's count on the
// meta device of MiMoV2FlashConfig(), the MTP layers the checkpoint
// holds not built. The hub's config.json is not in the stored sources.
func TestMiMoV2FlashConfig(t *testing.T) {
	tiny := string(readHF(t, "mimo_v2_flash-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "5.12.1"})
	if err == nil || !strings.Contains(err.Error(), `model_type "mimo_v2_flash" needs transformers 5.13 or later`) {
		t.Errorf("transformers 5.12.1: error %v, want one naming 5.13", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err == nil || !strings.Contains(err.Error(), "no flash-attention path") {
		t.Errorf("flash: error %v, want a refusal", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", MTP: true}); err == nil || !strings.Contains(err.Error(), "model.mtp") {
		t.Errorf("mtp=True: error %v, want a refusal naming model.mtp", err)
	}
	const end = `"tie_word_embeddings": false`
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 171_976},
		{"attention_bias", end, end + `, "attention_bias": true`, 172_952},
		{"all sparse", end, end + `, "mlp_layer_types": ["sparse", "sparse", "sparse"]`, 178_376},
		{"all full", end, end + `, "layer_types": ["full_attention", "full_attention", "full_attention"]`, 161_728},
		{"all sliding", end, end + `, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention"]`, 177_100},
		{"v_head_dim 48", `"v_head_dim": 32`, `"v_head_dim": 48`, 189_384},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"flat rope_parameters", end, end + `, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}`, "rope_parameters"},
		{"yarn without its factor", end, end + `, "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}, "sliding_attention": {"rope_type": "default"}}`, "partial_rotary_factor"},
		{"mlp_layer_types", end, end + `, "mlp_layer_types": ["dense", "moe", "sparse"]`, "mlp_layer_types"},
		{"layer_types", end, end + `, "layer_types": ["full_attention", "chunked_attention", "sliding_attention"]`, "layer_types"},
		{"top-k past the experts", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 5`, "num_experts_per_tok"},
	})
	// sliding_window_size (the hub's key) is read as MiMoV2FlashConfig
	// reads it: the window is one more.
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, end, end+`, "sliding_window_size": 20`, 1)), "eager")
	if err != nil {
		t.Fatal(err)
	}
	windows := map[int64]bool{}
	walkModel(m.Layers, func(l core.Layer) {
		if a, ok := l.(*nn.Attention); ok {
			windows[a.Window] = true
		}
	})
	if len(windows) != 2 || !windows[0] || !windows[21] {
		t.Errorf("sliding_window_size 20: windows %v, want 0 (full) and 21", windows)
	}
	d, err := hf.FromConfig(readHF(t, "mimo_v2_flash-defaults.json"), "eager")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Params(); got != 308_778_768_832 {
		t.Errorf("MiMoV2FlashConfig's defaults: %d parameters, want 308,778,768,832", got)
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
		"model.layers.1.self_attn.sinks", "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.norm.weight", "lm_head.weight")
}

// walkModel calls f on every layer under layers, depth first.
func walkModel(layers []core.Layer, f func(core.Layer)) {
	for _, l := range layers {
		f(l)
		walkModel(l.Children(), f)
	}
}
