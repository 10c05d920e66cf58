package sim

import (
	"regexp"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// ERNIE-4.5-21B-A3B-PT's parameters: 21,825,437,888, which transformers
// 5.25.0 counts on the meta device for ernie-4.5-21b-a3b-pt.json
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; the file carries the published config.json's sizes, the hub
// unreachable): 28 layers of 2560, layer 0 dense (intermediate 12288),
// layers 1-27 with 64 experts of 1536 (top 6) and two shared ones (one
// MLP of 3072), each router's (1, 64) e_score_correction_bias counted (a
// parameter without gradient), tied embeddings. ernie4_5_moe-tiny.json
// (every layer sparse: moe_layer_start_index 0): 103,240 by the same count.
func TestErnie45MoeParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"ernie-4.5-21b-a3b-pt.json": 21_825_437_888,
		"ernie4_5_moe-tiny.json":    103_240,
	})
}

// What ERNIE 4.5 MoE's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): ernie4_5_moe-tiny.json
// (64 wide, 4 heads of 16, 2 kv heads; 4 experts of 32, top 2, one
// shared expert), 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/ernie4_5_moe-tiny.json {1,2} 2 32 float32 {sdpa,eager} nocache
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/ernie4_5_moe-tiny.json {1,2} 2 32 bfloat16 {sdpa,eager} nocache keepfp32
//
// The router (Ernie4_5_MoeTopKRouter) runs in fp32 with autocast off: it
// keeps the fp32 copy of its input, the fp32 softmax, the top-k indices,
// the sum its clamp keeps and the clamped sum and gathered weights the
// division keeps; the weights reach the experts cast to the hidden
// states' dtype. bf16 is built as from_pretrained loads it (keepfp32:
// gate.weight stays fp32, _keep_in_fp32_modules_strict). Without
// keepfp32 the harness's .to(bfloat16) casts gate.weight too and
// weight.float() makes an fp32 copy F.linear keeps, 1,024 bytes a layer
// more (301,076 / 502,564 sdpa, 357,396 / 615,204 eager), which training
// from a checkpoint does not make.
func TestErnie45MoeSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"ernie4_5_moe-tiny.json", "fp32", "sdpa", 439_572, 763_172},
		{"ernie4_5_moe-tiny.json", "fp32", "eager", 487_700, 859_428},
		{"ernie4_5_moe-tiny.json", "bf16", "sdpa", 300_052, 500_516},
		{"ernie4_5_moe-tiny.json", "bf16", "eager", 356_372, 613_156},
	})
}

// moe_layer_start_index and moe_layer_interval choose the sparse layers
// (Ernie4_5_MoeDecoderLayer: (i + 1) % interval == 0 and start <= i <=
// end): from layer 1 the tiny model has one MoE block fewer, a dense MLP
// (3 x 64 x 128) in its place; every second layer from 0 makes layer 1
// sparse only. use_bias biases lm_head too (Ernie4_5_MoeForCausalLM),
// 256 more over the 7 biases a layer.
func TestErnie45MoeLayers(t *testing.T) {
	moe := int64(4*64 + 4 + 4*3*64*32 + 3*64*32) // router, statics bias, experts, shared
	dense := int64(3 * 64 * 128)
	for _, tc := range []struct {
		from, to string
		want     int64
	}{
		{`"moe_layer_start_index": 0`, `"moe_layer_start_index": 1`, 103_240 - moe + dense},
		{`"moe_layer_interval": 1`, `"moe_layer_interval": 2`, 103_240 - moe + dense},
		{`"use_bias": false`, `"use_bias": true`, 103_240 + 2*(64+32+32+64) + 2*(32+32+64) + 256},
	} {
		cfg := strings.Replace(string(readHF(t, "ernie4_5_moe-tiny.json")), tc.from, tc.to, 1)
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		if err != nil {
			t.Fatal(tc.to, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d", tc.to, got, tc.want)
		}
		// The lowered step registers the same parameters (the shared
		// experts' biases included, and the statics' (1, 4) biases, which
		// named_parameters() lists: requires_grad=False, no gradient).
		prog, err := tinyPlan(t, m).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var lowered int64
		for _, p := range prog.Params {
			if p.TiedTo < 0 { // the tied head once
				lowered += p.FullNumel
			}
		}
		if lowered != tc.want {
			t.Errorf("%s: the step registers %d parameters, want %d", tc.to, lowered, tc.want)
		}
	}
}

// ERNIE 4.5 MoE under transformers 4.57.1 (the 4.57.1 wheel unpacked on
// PYTHONPATH with requests and huggingface_hub 0.36.0 beside it; torch
// 2.15.0, the CPU, eager attention, loaded as from_pretrained loads it):
//
//	PYTHONPATH=tf4.57.1:deps python tools/oracle/hf_block_saved.py sim/testdata/hf/ernie4_5_moe-tiny.json {1,2} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// Ernie4_5_MoeSparseMoeBlock runs the per-expert loop (nn.Linear experts)
// behind an nn.Linear gate created in fp32 and kept there
// (_keep_in_fp32_modules_strict ["gate", "moe_statics"]), applied to
// hidden_states.float() under autocast disabled: in bf16 the gate keeps
// the fp32 copy of its input (16,384 B a layer here) and its weight,
// gradient and optimizer state are fp32. Kept fp32 519,428 / 922,884,
// bf16 371,716 / 643,844; at 2 layers bf16 param_bytes 207,520 (the
// statics' fp32 (1, 4) bias, a parameter, 16 B a layer included), grad_bytes
// 207,488 (the bias has none). Under sdpa 4.57.1 keeps 12,288 B a layer (bf16) more than
// 5.25.0, as it does for the dense ERNIE 4.5 (ernie4_5-tiny.json:
// 273,156 / 446,724 against 260,868 / 422,148): its v listing shows SDPA
// handed a (2, 1, 32, 32) bf16 mask (4,096 B) and k and v expanded by
// repeat_kv (8,192 B each) where 5.25.0 keeps them unexpanded (4,096 B
// each). Not ERNIE's nor the router's: 4.54 to 4.57 do so for every
// causal SDPA layer whose forward has neither a cache nor an
// attention_mask (nn.Attention.NoCacheMask; TestNoCacheMaskAsTransformers
// has the dense ERNIE's figures).
func TestErnie45MoeTransformers4(t *testing.T) {
	for _, tc := range []struct {
		precision     string
		one, two      int64
		params, grads int64 // at 2 layers
	}{
		{"fp32", 519_428, 922_884, 412_960, 412_928},
		{"bf16", 371_716, 643_844, 207_520, 207_488},
	} {
		checkSavedRelease(t, "ernie4_5_moe-tiny.json", "4.57.1", tc.precision, tc.one, tc.two, tc.params, tc.grads)
	}
}

// checkSavedRelease holds memsh's eager saves of file cut to 1 and 2
// layers under the transformers release
// version, weight copies included, and its parameter and gradient bytes
// at 2 layers, to transformers' (hf_block_saved.py ... eager nocache
// keepfp32 under that release).
func checkSavedRelease(t *testing.T, file, version, precision string, one, two, params, grads int64) {
	t.Helper()
	var got [2]int64
	for i, layers := range []string{"1", "2"} {
		cfg := regexp.MustCompile(`"num_hidden_layers": \d+`).ReplaceAllString(string(readHF(t, file)), `"num_hidden_layers": `+layers)
		r := evalPlan(t, hfOraclePlan(t, []byte(cfg), hf.Options{Attn: "eager", Transformers: version}, precision))
		got[i] = r.SavedActivations + r.SavedWeightCopies
		if layers == "2" && (r.States.Params != params || r.States.Grads != grads) {
			t.Errorf("%s %s %s: parameters %d B, gradients %d B, want %d and %d", file, version, precision, r.States.Params, r.States.Grads, params, grads)
		}
	}
	if got != [2]int64{one, two} {
		t.Errorf("%s %s: memsh keeps %d / %d, transformers %s %d / %d", file, precision, got[0], got[1], version, one, two)
	}
}
