package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Kolibri-1's parameters, which transformers 5.25.0 counts on the meta
// device (the first line of `/work/venv-t/bin/python
// tools/oracle/hf_defaults.py --only FILE`): kolibri1-tiny.json 247,200
// (64 wide, 3 layers of 4 heads of 16 over 2 kv heads, 8 experts of 32
// and a shared expert of 48 a layer, vocab 256 untied).
func TestKolibri1Params(t *testing.T) {
	checkParams(t, map[string]int64{"kolibri1-tiny.json": 247_200})
}

// What Kolibri-1 keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast; the experts as grouped_mm, the
// default): kolibri1-tiny.json (a sliding layer of 8 keys, a full layer
// without rope, a sliding layer) cut to 1, 2 and 3 layers, 2 samples of
// 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/kolibri1-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The router's F.linear of fp32 casts keeps the fp32 input and, in bf16,
// the weight's fp32 copy (memsh's SavedWeightCopies, counted here: the
// harness counts every storage but the parameters); its gather keeps the
// fp32 logits ([tokens, experts]: GatherBackward0 saves self), the
// sigmoid its [tokens, k] output.
func TestKolibri1SavesAsTransformers(t *testing.T) {
	for _, tc := range []savedDepths{
		{"fp32", "sdpa", [3]int64{597_796, 1_050_948, 1_528_676}},
		{"fp32", "eager", [3]int64{621_348, 1_122_628, 1_623_908}},
		{"bf16", "sdpa", [3]int64{409_380, 704_836, 1_012_580}},
		{"bf16", "eager", [3]int64{453_412, 805_188, 1_156_964}},
	} {
		for i, want := range tc.saved {
			r := evalPlan(t, hfSavedPlan(t, "kolibri1-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn}, false))
			if got := r.SavedActivations + r.SavedWeightCopies; got != want {
				t.Errorf("kolibri1-tiny.json %s %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// Kolibri-1's gate and keys: kolibri1 under 5.20 is refused (the 5.20.0
// wheel is the first with models/kolibri1); transformers 5.25.0 counts,
// on the meta device, 230,816 with the head tied and 172,704 with 4
// experts, num_experts or its attribute_map name num_local_experts alike;
// kolibri1-defaults.json, Kolibri1Config() written out as to_dict writes
// it (num_local_experts; no layer_types: every fifth layer full),
// 78,103,055,360 (Aleph-Alpha/Kolibri-1's config.json and card were not
// reachable from here). A sliding layer without a positive
// sliding_window is refused as Kolibri1Config refuses it; with every
// layer full a null sliding_window rotates every layer (the same
// parameters).
func TestKolibri1Config(t *testing.T) {
	checkParams(t, map[string]int64{"kolibri1-defaults.json": 78_103_055_360})
	tiny := string(readHF(t, "kolibri1-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.19.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "kolibri1" needs transformers 5.20 or later`) {
		t.Errorf("transformers 5.19.0: error %v, want one naming 5.20", err)
	}
	for _, c := range []struct {
		old, new string
		want     int64
	}{
		{`"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 230_816},
		{`"num_experts": 8`, `"num_experts": 4`, 172_704},
		{`"num_experts": 8`, `"num_local_experts": 4`, 172_704},
		{`"sliding_window": 8`, `"sliding_window": null, "layer_types": ["full_attention", "full_attention", "full_attention"]`, 247_200},
	} {
		data := strings.Replace(tiny, c.old, c.new, 1)
		if strings.Contains(c.new, "layer_types") {
			data = strings.Replace(data, `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"],`, "", 1)
		}
		m, err := hf.FromConfig([]byte(data), "sdpa")
		if err != nil {
			t.Fatalf("%s: %v", c.new, err)
		}
		if got := m.Params(); got != c.want {
			t.Errorf("%s: %d parameters, want %d", c.new, got, c.want)
		}
	}
	for _, sw := range []string{"null", "0"} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, `"sliding_window": 8`, `"sliding_window": `+sw, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), `"sliding_window" must be a positive integer with sliding_attention layers (got `+sw+`)`) {
			t.Errorf("sliding_window %s: error %v", sw, err)
		}
	}
}

// The same with the experts as transformers' eager loop, fp32, sdpa, 1
// to 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/kolibri1-tiny.json {1,2,3} 2 32 float32 sdpa nocache eagerexperts
//
// less the views the loop takes of gate_up_proj and down_proj, which the
// harness counts (8 x 64 x 64 + 8 x 64 x 32 elements a layer, as
// TestHYV3EagerExpertsAsTransformers).
func TestKolibri1EagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "kolibri1-tiny.json", 1, 0, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{826_116, 1_507_588, 2_213_636}},
	})
}
