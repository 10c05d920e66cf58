package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// LFM2-8B-A1B's parameters: 8,339,929,856, the hub's BF16 safetensors
// total (its API lists 704 F32 values besides: the expert_bias buffers,
// 22 MoE layers x 32 experts, not parameters), which transformers 5.25.0
// counts on the meta device for lfm2_moe-8b-a1b.json (the published
// config.json's sizes: 24 layers, attention at 2, 6, 10, 14, 18, 21, the
// first 2 dense of 7168, 32 experts of 1792, 4 a token; tied head).
// lfm2_moe-tiny.json: 198,496.
func TestLFM2MoEParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"lfm2_moe-8b-a1b.json": 8_339_929_856,
		"lfm2_moe-tiny.json":   198_496,
	})
}

// What LFM2-MoE's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// lfm2_moe-tiny.json (64 wide, layer_types conv, full_attention, conv,
// layer 0 dense of 192, layers 1 and 2 MoE: 8 experts of 32, 2 a token,
// sigmoid router with expert_bias), 2 samples of 32 tokens, at 1, 2 and 3
// layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/lfm2_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// The router's F.linear and sigmoid run in the activations' dtype (bf16
// in bf16: the sigmoid keeps a bf16 [tokens, experts] output, the top-k
// weights are bf16; DeepSeek-V3's router would keep fp32 ones).
func TestLFM2MoESavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "lfm2_moe-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{510_724, 853_028, 1_189_700}},
		{"fp32", "eager", [3]int64{510_724, 901_156, 1_237_828}},
		{"bf16", "sdpa", [3]int64{313_604, 517_028, 704_068}},
		{"bf16", "eager", [3]int64{313_604, 573_348, 760_388}},
	})
}

// lfm2_moe under a 4.x release is refused (models/lfm2_moe came with
// 5.0); layer_types is required (Lfm2MoeConfig makes no default);
// num_dense_layers picks the dense layers; the names are transformers'.
func TestLFM2MoEConfig(t *testing.T) {
	tiny := string(readHF(t, "lfm2_moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "lfm2_moe" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.3: error %v, want one naming 5.0", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"layer_types": ["conv", "full_attention", "conv"],`, ``, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"layer_types" must list one attention type per layer (3)`) {
		t.Errorf("no layer_types: error %v", err)
	}
	// A dense feed-forward 3 x 64 x 192; a sparse one 8 experts of 3 x 64
	// x 32 and the router's 8 x 64.
	const dense, sparse = 3 * 64 * 192, 8*3*64*32 + 8*64
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"num_dense_layers": 1`, `"num_dense_layers": 3`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(198_496+2*(dense-sparse)); got != want {
		t.Errorf("num_dense_layers 3: %d parameters, want %d", got, want)
	}
	m, err = hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.feed_forward.w1.weight", "model.layers.1.feed_forward.gate.weight",
		"model.layers.1.feed_forward.experts.gate_up_proj", "model.layers.2.feed_forward.experts.down_proj",
		"model.layers.2.conv.in_proj.weight", "model.layers.1.self_attn.q_layernorm.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}
