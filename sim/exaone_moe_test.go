package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What K-EXAONE's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// exaone_moe-tiny.json (64 wide, 4 heads of 16, 2 kv heads, layer 0 dense
// of 96, then 8 experts of 32, 2 a token, 1 shared; layers 0 and 1 slide
// over 16 keys, layer 2 global without rotary), 2 samples of 32 tokens,
// at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/exaone_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// The harness's kept bytes (it saves 2,048 B a MoE layer more on the
// expert selection's branch, which no gradient reaches). bf16
// param_bytes and grad_bytes at 3 layers 362,560 (routers fp32).
func TestExaoneMoeSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "exaone_moe-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{402_692, 798_244, 1_193_796}},
		{"fp32", "eager", [3]int64{426_244, 845_348, 1_264_452}},
		{"bf16", "sdpa", [3]int64{253_188, 501_284, 749_380}},
		{"bf16", "eager", [3]int64{297_220, 589_348, 881_476}},
	})
}

// exaone_moe under 5.0.0 is refused (models/exaone_moe came with 5.1);
// mlp_layer_types picks the MoE layers over first_k_dense_replace, a
// malformed list is refused naming the key; the names are transformers'.
// (K-EXAONE-236B-A23B's own config.json is not in the stored sources: its
// full-size parameter count is not asserted.)
func TestExaoneMoeConfig(t *testing.T) {
	tiny := string(readHF(t, "exaone_moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.0.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "exaone_moe" needs transformers 5.1 or later`) {
		t.Errorf("transformers 5.0.0: error %v, want one naming 5.1", err)
	}
	// 3 layers: a dense MLP 3 x 64 x 96; an MoE layer 8 experts of 3 x
	// 64 x 32, a shared one, the router 8 x 64.
	const dense, sparse = 3 * 64 * 96, 9*3*64*32 + 8*64
	base, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, to string
		delta    int64
	}{
		{"all sparse", `"mlp_layer_types": ["sparse", "sparse", "sparse"]`, sparse - dense},
		{"last dense", `"mlp_layer_types": ["sparse", "sparse", "dense"]`, 0},
		{"all dense", `"mlp_layer_types": ["dense", "dense", "dense"]`, 2 * (dense - sparse)},
	} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"first_k_dense_replace": 1,`, `"first_k_dense_replace": 1, `+tc.to+`,`, 1)), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := m.Params() - base.Params(); got != tc.delta {
			t.Errorf("%s: %+d parameters against the file, want %+d", tc.name, got, tc.delta)
		}
	}
	for _, bad := range []string{`"mlp_layer_types": ["dense", "sparse"]`, `"mlp_layer_types": ["dense", "moe", "sparse"]`} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, `"first_k_dense_replace": 1,`, `"first_k_dense_replace": 1, `+bad+`,`, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), "mlp_layer_types") {
			t.Errorf("%s: error %v, want one naming the key", bad, err)
		}
	}
	checkHasParams(t, tiny, "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight",
		"model.layers.1.self_attn.q_norm.weight", "model.layers.1.input_layernorm.weight", "lm_head.weight")
}
