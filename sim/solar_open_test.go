package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Solar Open's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// solar_open-tiny.json (64 wide, 4 heads of 24, 2 kv heads, every layer 8
// experts of 32, 2 a token, 1 shared; the file's intermediate_size and
// first_k_dense_replace unread, as the published config.json's), 2
// samples of 32 tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/solar_open-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// Llama's attention before GLM-4.5's MoE: the router's weight and
// correction bias fp32 (_keep_in_fp32_modules_strict), its fp32 GEMM over
// the input cast to fp32. The figures are the harness's kept bytes (it
// saves 2,048 B a layer more on the expert selection's branch, which no
// gradient reaches). bf16 param_bytes and grad_bytes at 3 layers 475,008.
func TestSolarOpenSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "solar_open-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{427_044, 771_908, 1_116_772}},
		{"fp32", "eager", [3]int64{483_364, 884_548, 1_285_732}},
		{"bf16", "sdpa", [3]int64{272_420, 482_116, 691_812}},
		{"bf16", "eager", [3]int64{332_836, 602_948, 873_060}},
	})
}

// Solar-Open-100B: 102,651,793,408 parameters, which transformers 5.25.0
// counts on the meta device for solar-open-100b.json (the published
// config.json's sizes, as macMLX's SolarOpenConfigurationTests quote it:
// 48 layers of 4096, 64 heads of 128, 8 kv heads, 128 experts of 1280,
// 8 a token, and 1 shared, 196,608 untied embeddings), the card's
// "Total Parameters: 102.6B". solar_open-tiny.json: 235,968.
func TestSolarOpenParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"solar-open-100b.json": 102_651_793_408,
		"solar_open-tiny.json": 235_968,
	})
}

// solar_open under 4.57.1 is refused (models/solar_open came with 5.0);
// first_k_dense_replace and intermediate_size are not read (every layer
// is an MoE layer: the same model with or without them, as transformers
// builds it); a partial rotary factor is refused (LlamaAttention turns
// whole heads); the names are transformers'.
func TestSolarOpenConfig(t *testing.T) {
	tiny := string(readHF(t, "solar_open-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.1"})
	if err == nil || !strings.Contains(err.Error(), `model_type "solar_open" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.1: error %v, want one naming 5.0", err)
	}
	want, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	dense, err := hf.FromConfig([]byte(strings.Replace(tiny, `"first_k_dense_replace": 0`, `"first_k_dense_replace": 2`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if dense.Params() != want.Params() {
		t.Errorf("first_k_dense_replace 2: %d parameters, want %d (every layer MoE)", dense.Params(), want.Params())
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"partial_rotary_factor": 1.0`, `"partial_rotary_factor": 0.5`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), "partial_rotary_factor") {
		t.Errorf("partial_rotary_factor 0.5: error %v, want one naming the key", err)
	}
	checkHasParams(t, tiny, "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.gate_up_proj",
		"model.layers.2.mlp.shared_experts.down_proj.weight", "model.layers.0.self_attn.o_proj.weight", "lm_head.weight")
}
