package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// GraniteSWA's parameters on the meta device (transformers 5.25.0):
// granite_swa-tiny.json 164,432 (64 wide, 4 layers, 4 heads of 16, 2 kv
// heads, MLP 128, vocab 256 tied; each layer's sinks 4);
// granite_swa-defaults.json 2,144,463,840, GraniteSWAConfig()'s defaults
// (the class documents ibm-granite/granite-swash-2b: 2560 wide, 24
// layers, 20 heads of 128, 4 kv heads, MLP 8192, vocab 100,352 tied),
// written out by
//
//	GraniteSWAConfig() and GraniteSWAForCausalLM on the meta device, transformers 5.25.0
//
// (the published config.json is not reachable from here: the count is
// the one transformers builds from the class's defaults, not the card's).
func TestGraniteSWAParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"granite_swa-tiny.json":     164_432,
		"granite_swa-defaults.json": 2_144_463_840,
	})
}

// What GraniteSWA's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// granite_swa-tiny.json cut to 1 to 4 layers (layer_rope_theta cut with
// them), 2 samples of 32 tokens, eager (GraniteSWAPreTrainedModel has no
// SDPA path: transformers' default load runs eager, and memsh's
// attn="sdpa" with it):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/granite_swa-tiny.json {1,2,3,4} 2 32 {float32,bfloat16} eager nocache
//
// Layer 0 is full attention with rope base 10,000, layer 1 slides over 16
// keys without rope (base 0), layer 2 slides with base 500,000 (a second
// rotary embedding: its cos and sin, 4,096 bytes in fp32), layer 3 slides
// with base 10,000 again. Each layer keeps Granite's eager layer and the
// sink: logsumexp's input (the masked scores) and output, the fp32
// sigmoid, and the P.V product and the scale cast back that the scaling
// product saves.
func TestGraniteSWASavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		want      [4]int64
	}{
		{"fp32", [4]int64{499_460, 878_852, 1_262_340, 1_641_732}},
		{"bf16", [4]int64{341_764, 581_892, 824_068, 1_064_196}},
	} {
		checkGraniteSaved(t, "granite_swa-tiny.json", tc.precision, tc.want[:])
	}
}

// With every layer checkpointed (use_reentrant=False), the same with
// ckpt held:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/granite_swa-tiny.json {1,2,3,4} 2 32 {float32,bfloat16} eager nocache ckpt held
//
// saved: each layer's input (Granite's figures: fp32 132,356, 148,740,
// 165,124, 181,508; bf16 107,780, 115,972, 124,164, 132,356); held, what
// the checkpointed layers are handed and keep to their backward:
// position_ids (256 bytes), each rotary embedding's cos and sin that a
// layer uses (one pair at 1 and 2 layers, two from 3: layer 2's base
// 500,000), and each eager mask a layer gets ([2, 1, 32, 32]: the full
// one at 1 layer, the sliding one too from 2): fp32 12,544, 20,736,
// 24,832, 24,832; bf16 6,400, 10,496, 12,544, 12,544.
func TestGraniteSWACheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision   string
		saved, held [4]int64
	}{
		{"fp32", [4]int64{132_356, 148_740, 165_124, 181_508}, [4]int64{12_544, 20_736, 24_832, 24_832}},
		{"bf16", [4]int64{107_780, 115_972, 124_164, 132_356}, [4]int64{6_400, 10_496, 12_544, 12_544}},
	} {
		for i := range tc.saved {
			want := tc.saved[i] + tc.held[i]
			if got := graniteSaved(t, "granite_swa-tiny.json", i+1, tc.precision, "eager", true); got != want {
				t.Errorf("%s, %d layers: %d saved, want %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
		}
	}
}

// granite_swa under 5.15 is refused (the 5.14.0 wheel has no
// models/granite_swa, 5.15.0 has); attention_bias biases q, k, v and o
// and mlp_bias the MLP (Granite's); layer_types and layer_rope_theta are
// one entry a layer, a rope base non-negative; a null sliding_window is
// refused (the model makes a sliding mask every forward); attn="flash"
// (the kernel with sinks transformers substitutes for
// flash_attention_2) keeps less than eager.
func TestGraniteSWAConfig(t *testing.T) {
	tiny := string(readHF(t, "granite_swa-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.14.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "granite_swa" needs transformers 5.15 or later`) {
		t.Errorf("transformers 5.14.0: error %v, want one naming 5.15", err)
	}
	checkEditedParams(t, tiny, []configEdit{
		{"attention_bias", `"rms_norm_eps"`, `"attention_bias": true, "rms_norm_eps"`, 164_432 + 4*(64+32+32+64)},
		{"mlp_bias", `"rms_norm_eps"`, `"mlp_bias": true, "rms_norm_eps"`, 164_432 + 4*(128+128+64)},
		{"layer_types", `"rms_norm_eps"`, `"layer_types": ["full_attention", "full_attention", "sliding_attention", "full_attention"], "rms_norm_eps"`, 164_432},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"layer_rope_theta short", `[10000.0, 0, 500000.0, 10000.0]`, `[10000.0, 0, 500000.0]`, `"layer_rope_theta"`},
		{"layer_rope_theta negative", `[10000.0, 0, 500000.0, 10000.0]`, `[10000.0, 0, -1, 10000.0]`, `"layer_rope_theta"`},
		{"layer_types unknown", `"rms_norm_eps"`, `"layer_types": ["full_attention", "chunked_attention", "full_attention", "full_attention"], "rms_norm_eps"`, `"layer_types"`},
		{"sliding_window null", `"sliding_window": 16`, `"sliding_window": null`, `"sliding_window"`},
	})
	flash := graniteSaved(t, "granite_swa-tiny.json", 2, "bf16", "flash", false)
	if eager := graniteSaved(t, "granite_swa-tiny.json", 2, "bf16", "eager", false); flash <= 0 || flash >= eager {
		t.Errorf("flash keeps %d, eager %d: want less under the kernel with sinks", flash, eager)
	}
}

// checkGraniteSaved checks what file's model cut to 1, 2, ... layers
// saves for backward (want[i] at i+1 layers) under eager and under
// attn="sdpa", which runs eager for the GraniteSWA families (no SDPA path).
func checkGraniteSaved(t *testing.T, file, precision string, want []int64) {
	t.Helper()
	for _, attn := range []string{"eager", "sdpa"} {
		for i, w := range want {
			if got := graniteSaved(t, file, i+1, precision, attn, false); got != w {
				t.Errorf("%s %s, %d layers: %d saved, want %d (%+d)", precision, attn, i+1, got, w, got-w)
			}
		}
	}
}
