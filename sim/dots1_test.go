package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// dots.llm1's parameters: 142,774,373,888 (the card's "142B total"),
// which transformers 5.25.0 counts on the meta device for
// dots.llm1.inst.json (the published config.json's sizes: 62 layers of
// 4096, 32 heads and kv heads, the first layer dense of 10,944, then 128
// experts of 1408, 6 a token, and 2 shared; 152,064 untied embeddings).
// dots1-tiny.json: 218,656.
func TestDots1Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"dots.llm1.inst.json": 142_774_373_888,
		"dots1-tiny.json":     218_656,
	})
}

// What dots.llm1's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// dots1-tiny.json (64 wide, 4 heads of 16, 2 kv heads, layer 0 dense of
// 128, then 8 experts of 32, 2 a token, 2 shared), 2 samples of 32
// tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/dots1-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// Qwen3's attention before DeepSeek-V3's MoE: the router's weight and
// correction bias fp32 (_keep_in_fp32_modules_strict from 5.24 and 5.0),
// its fp32 GEMM over the input cast to fp32. The figures are the
// harness's kept bytes: it saves 2,048 B more a MoE layer on the expert
// selection's branch, which no gradient reaches (they die with the
// forward, as DeepSeek-V3's do: setExperts' doc). At 3 layers, bf16,
// param_bytes and grad_bytes 439,360 (TestMoERouterKeptFP32Bytes).
func TestDots1SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "dots1-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{450_820, 854_564, 1_258_308}},
		{"fp32", "eager", [3]int64{498_948, 950_820, 1_402_692}},
		{"bf16", "sdpa", [3]int64{297_220, 549_412, 801_604}},
		{"bf16", "eager", [3]int64{353_540, 662_052, 970_564}},
	})
}

// dots1 under 4.52.4 is refused (models/dots1 came with 4.53); layer_types,
// else max_window_layers with sliding_window, picks the sliding layers;
// norm_topk_prob defaults to false; the names are transformers'.
func TestDots1Config(t *testing.T) {
	tiny := string(readHF(t, "dots1-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.52.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "dots1" needs transformers 4.53 or later`) {
		t.Errorf("transformers 4.52.4: error %v, want one naming 4.53", err)
	}
	// Without norm_topk_prob (Dots1Config's false) the weights are not
	// renormalised: 768 B less a MoE layer (the sum and the division's
	// operands), at 2 layers transformers 5.25.0 keeps 853,796 (fp32) and
	// 548,644 (bf16) bytes (hf_block_saved.py, the file without the key,
	// 2 2 32 {float32,bfloat16} sdpa nocache keepfp32).
	noNorm := strings.Replace(strings.Replace(tiny, `"norm_topk_prob": true,`, "", 1), `"num_hidden_layers": 3`, `"num_hidden_layers": 2`, 1)
	for precision, want := range map[string]int64{"fp32": 853_796, "bf16": 548_644} {
		if got := evalPlan(t, hfOraclePlan(t, []byte(noNorm), hf.Options{Attn: "sdpa"}, precision)).SavedActivations; got != want {
			t.Errorf("no norm_topk_prob, %s: memsh keeps %d bytes, transformers %d (%+d)", precision, got, want, got-want)
		}
	}
	checkHasParams(t, tiny, "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight",
		"model.layers.1.self_attn.q_norm.weight", "lm_head.weight")
}

// Under transformers 4.57.1 (the wheel on PYTHONPATH with requests,
// huggingface_hub 0.36.0 and tokenizers 0.22.1 beside it; torch 2.15.0,
// the CPU, eager attention, loaded by from_pretrained):
//
//	PYTHONPATH=tf4.57.1:deps python tools/oracle/hf_block_saved.py sim/testdata/hf/dots1-tiny.json {1,2} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// Dots1MoE.moe loops over an nn.ModuleList of experts (DeepseekV3MoE's);
// no router is kept fp32 (4.57.1's class keeps nothing, the router's
// weight.float() copy saved instead). fp32 498,948 / 982,532, bf16
// 353,540 / 695,812; at 2 layers param_bytes and grad_bytes 577,024
// (fp32), 288,512 (bf16).
func TestDots1Transformers4(t *testing.T) {
	checkSavedRelease(t, "dots1-tiny.json", "4.57.1", "fp32", 498_948, 982_532, 577_024, 577_024)
	checkSavedRelease(t, "dots1-tiny.json", "4.57.1", "bf16", 353_540, 695_812, 288_512, 288_512)
}
