package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Granite MoE Shared's layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): granitemoeshared-tiny.json (granitemoe-tiny.json's
// sizes: 64 wide, 4 heads of 16, 2 kv heads, 4 experts of 32, 2 a token,
// every multiplier off 1, tied; and a shared_mlp of 48), 2 samples of 32
// tokens, at 1, 2 and 3 layers, the experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/granitemoeshared-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// param_bytes and grad_bytes at 3 layers: 623,360 (fp32).
func TestGraniteMoeSharedSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "granitemoeshared-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{454_420, 788_772, 1_123_124}},
		{"fp32", "eager", [3]int64{502_548, 885_028, 1_267_508}},
		{"bf16", "sdpa", [3]int64{288_276, 474_916, 661_556}},
		{"bf16", "eager", [3]int64{344_596, 587_556, 830_516}},
	})
}

// The same with the experts as transformers' eager loop (eagerexperts:
// experts_implementation "eager"), sdpa:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/granitemoeshared-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 eagerexperts
//
// less the views the loop takes of gate_up_proj and down_proj for experts
// e > 0, which the harness counts (the whole 3-D parameters once a layer,
// 4 x 64 x 64 + 4 x 64 x 32 elements; TestLongcatFlashSavesAsTransformers).
func TestGraniteMoeSharedEagerExpertsAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		bytes     int64
		saved     [3]int64
	}{
		{"fp32", 4, [3]int64{584_452, 1_048_836, 1_513_220}},
		{"bf16", 2, [3]int64{352_772, 603_908, 855_044}},
	} {
		for i, saved := range tc.saved {
			want := saved - int64(i+1)*(4*64*64+4*64*32)*tc.bytes
			got := hfSaved(t, "granitemoeshared-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa", Experts: "eager"}, false)
			if got != want {
				t.Errorf("%s, %d layers: memsh keeps %d bytes, transformers %d less the parameter views, %d (%+d)", tc.precision, i+1, got, saved, want, got-want)
			}
		}
	}
}

// granitemoeshared under 4.48.0 is refused (models/granitemoeshared came
// with 4.49); shared_intermediate_size 0, GraniteMoeSharedConfig's
// default, builds no shared_mlp (GraniteMoe's layer); a bad size is
// refused naming the key; the names are transformers'.
func TestGraniteMoeSharedConfig(t *testing.T) {
	tiny := string(readHF(t, "granitemoeshared-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.48.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "granitemoeshared" needs transformers 4.49 or later`) {
		t.Errorf("transformers 4.48.0: error %v, want one naming 4.49", err)
	}
	base, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	// 3 layers, each with a shared_mlp of input_linear 64 x 96 and
	// output_linear 48 x 64.
	const shared = 64*96 + 48*64
	for _, tc := range []struct {
		name, to string
		delta    int64
	}{
		{"shared_intermediate_size 0", `"shared_intermediate_size": 0`, -3 * shared},
		{"absent", ``, -3 * shared},
		{"shared_intermediate_size 96", `"shared_intermediate_size": 96`, 3 * shared},
	} {
		cfg := strings.Replace(tiny, `"shared_intermediate_size": 48,`, tc.to+map[bool]string{true: ",", false: ""}[tc.to != ""], 1)
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := m.Params() - base.Params(); got != tc.delta {
			t.Errorf("%s: %+d parameters against the file, want %+d", tc.name, got, tc.delta)
		}
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"shared_intermediate_size": 48`, `"shared_intermediate_size": -4`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), "shared_intermediate_size") {
		t.Errorf("shared_intermediate_size -4: error %v, want one naming the key", err)
	}
	checkHasParams(t, tiny, "model.layers.0.shared_mlp.input_linear.weight", "model.layers.2.shared_mlp.output_linear.weight",
		"model.layers.1.block_sparse_moe.experts.gate_up_proj", "model.layers.1.block_sparse_moe.router.weight", "model.norm.weight")
}
