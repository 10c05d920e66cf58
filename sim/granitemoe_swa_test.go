package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// GraniteMoeSWA's parameters on the meta device (transformers 5.25.0):
// granitemoe_swa-tiny.json 202,320 (granitemoeshared-tiny.json's sizes,
// 64 wide, 4 heads of 16, 2 kv heads, 4 experts of 32, 2 a token, a
// shared_mlp of 48, vocab 256 tied; 4 layers, each with its sinks 4).
func TestGraniteMoeSWAParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"granitemoe_swa-tiny.json": 202_320,
	})
}

// What GraniteMoeSWA's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): granitemoe_swa-tiny.json cut to 1 to 4 layers
// (layer_types and layer_rope_theta cut with them), 2 samples of 32
// tokens, eager (GraniteMoeSWAPreTrainedModel has no SDPA path: memsh's
// attn="sdpa" runs eager as transformers' default load does), the experts
// as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/granitemoe_swa-tiny.json {1,2,3,4} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// layer_types as written (sliding, full, sliding, full over 16 keys) and
// layer_rope_theta [0, 10000, 10000, 1000000]: layer 0 has no rope, 1 and
// 2 share rotary_embs.0, 3 has rotary_embs.1. Each layer keeps Granite
// MoE Shared's layer (sim/granitemoeshared_test.go) with GraniteSWA's
// sink (sim/granite_swa_test.go). param_bytes at 4 layers: 809,280 (fp32).
func TestGraniteMoeSWASavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		want      [4]int64
	}{
		{"fp32", [4]int64{549_652, 987_428, 1_421_108, 1_858_884}},
		{"bf16", [4]int64{369_172, 640_804, 910_388, 1_182_020}},
	} {
		checkGraniteSaved(t, "granitemoe_swa-tiny.json", tc.precision, tc.want[:])
	}
}

// granitemoe_swa under 5.15 is refused (the 5.14.0 wheel has no
// models/granitemoe_swa, 5.15.0 has); shared_intermediate_size 0 builds
// no shared_mlp; the SWA keys are read as for granite_swa; the names are
// transformers'.
func TestGraniteMoeSWAConfig(t *testing.T) {
	tiny := string(readHF(t, "granitemoe_swa-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.14.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "granitemoe_swa" needs transformers 5.15 or later`) {
		t.Errorf("transformers 5.14.0: error %v, want one naming 5.15", err)
	}
	const shared = 64*96 + 48*64 // input_linear 64 x 96, output_linear 48 x 64
	checkEditedParams(t, tiny, []configEdit{
		{"shared_intermediate_size 0", `"shared_intermediate_size": 48`, `"shared_intermediate_size": 0`, 202_320 - 4*shared},
		{"attention_bias", `"rms_norm_eps"`, `"attention_bias": true, "rms_norm_eps"`, 202_320 + 4*(64+32+32+64)},
		{"no layer_types", `"layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],`, ``, 202_320},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"layer_rope_theta long", `[0, 10000.0, 10000.0, 1000000.0]`, `[0, 10000.0, 10000.0, 1000000.0, 0]`, `"layer_rope_theta"`},
		{"layer_types short", `"sliding_attention", "full_attention", "sliding_attention", "full_attention"]`, `"sliding_attention", "full_attention"]`, `"layer_types"`},
		{"sliding_window null", `"sliding_window": 16`, `"sliding_window": null`, `"sliding_window"`},
	})
	checkHasParams(t, tiny, "model.layers.0.self_attn.sinks", "model.layers.3.shared_mlp.input_linear.weight",
		"model.layers.1.block_sparse_moe.experts.gate_up_proj", "model.layers.1.block_sparse_moe.router.weight", "model.norm.weight")
}
