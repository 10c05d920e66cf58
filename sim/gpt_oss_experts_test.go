package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// TestGptOssEagerExpertsAsTransformers: gpt-oss's experts run the clamped
// GLU of GptOssExperts._apply_gate (models/gpt_oss/modeling_gpt_oss.py
// l.80-86 at 5.25.0; 4.57.1's loop computes it inline, l.118-122) in
// every experts implementation: the per-expert loop (5.x's
// experts="eager", 4.57.1's training forward) keeps, for each expert's
// rows, the clamped gate, the sigmoid, glu and up + 1 beside gate_up,
// where SwiGLU keeps only the activation's output: three more
// [rows, intermediate] tensors. memsh lowered the loop as SwiGLU before
// (nn.MoE.ClampedLoop, set only for MiniMax M3), 3 x 128 x 64 elements
// a layer short (98,304 B fp32, 49,152 B bf16).
//
// Measured on tinyGptOSS (hidden 64, 4 heads, 2 kv heads of 16, 4
// experts of 64, top 2), 1 and 2 layers, one sequence of 64 tokens,
// eager attention, on the CPU with torch 2.15.0 and transformers 5.25.0
// (and 4.57.1 on PYTHONPATH with requests, huggingface_hub 0.36.0 and
// tokenizers 0.22.1 beside it: the same bytes), the config written out
// with num_hidden_layers and layer_types cut to the depth:
//
//	python tools/oracle/hf_block_saved.py CONFIG.json {1,2} 1 64 {float32,bfloat16} eager nocache [eagerexperts]
//
// kept (= saved), 1 / 2 layers:
//
//	grouped_mm (5.25.0's default): fp32 654,108 / 1,188,140; bf16 413,468 / 717,100
//	eager loop (5.25.0 eagerexperts, 4.57.1): fp32 881,420 / 1,642,764; bf16 526,092 / 942,348
//
// The loop's figures count, once a layer, the whole gate_up_proj and
// down_proj storages ([4, 64, 128] and [4, 64, 64]): the harness counts
// the views the loop takes of them for experts e > 0, which save nothing
// (checkEagerExpertsSaved). Before this change memsh kept 586,508 /
// 1,052,940 (fp32) and 378,636 / 647,436 (bf16) bytes under the loop.
func TestGptOssEagerExpertsAsTransformers(t *testing.T) {
	const views = 4*64*128 + 4*64*64
	for _, tc := range []struct {
		transformers, experts, precision string
		saved                            [2]int64
		loop                             bool
	}{
		{"5.25.0", "", "fp32", [2]int64{654_108, 1_188_140}, false},
		{"5.25.0", "", "bf16", [2]int64{413_468, 717_100}, false},
		{"5.25.0", "eager", "fp32", [2]int64{881_420, 1_642_764}, true},
		{"5.25.0", "eager", "bf16", [2]int64{526_092, 942_348}, true},
		{"4.57.1", "", "fp32", [2]int64{881_420, 1_642_764}, true},
		{"4.57.1", "", "bf16", [2]int64{526_092, 942_348}, true},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			want := saved
			if tc.loop {
				dt, err := units.ParseDType(tc.precision)
				if err != nil {
					t.Fatal(err)
				}
				want -= dt.Bytes(layers * views)
			}
			m, err := hf.FromConfigOptions(ropeConfig(t, "gpt-oss-20b.json", layers, tinyGptOSS()),
				hf.Options{Attn: "eager", Transformers: tc.transformers, Experts: tc.experts})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 1, 64
			if p.Precision, err = core.LookupPrecision(tc.precision); err != nil {
				t.Fatal(err)
			}
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("transformers %s experts=%q %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)",
					tc.transformers, tc.experts, tc.precision, layers, got, want, got-want)
			}
		}
	}
}

// gpt_oss before transformers 4.55 is refused: 4.55.0 is the first
// wheel with models/gpt_oss, 4.54.0 has none (unzip -l of both wheels).
func TestGptOssSince(t *testing.T) {
	cfg := ropeConfig(t, "gpt-oss-20b.json", 2, tinyGptOSS())
	_, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "eager", Transformers: "4.54.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "gpt_oss" needs transformers 4.55 or later`) {
		t.Errorf("transformers 4.54.0: error %v, want one naming 4.55", err)
	}
	if _, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "eager", Transformers: "4.55.0"}); err != nil {
		t.Errorf("transformers 4.55.0: %v", err)
	}
}
