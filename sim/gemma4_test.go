package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Gemma 4's text model, parameter counts as transformers 5.17.0 counts
// them: AutoModelForCausalLM.from_config(config) on the meta device,
// sum(p.numel()) (tools/oracle/gemma4_saved.py --count CONFIG).
func TestGemma4Params(t *testing.T) {
	for _, tc := range []struct {
		file, arch string
		want       int64
	}{
		{"gemma4-tiny.json", "", 707_072},
		{"gemma4-moe-tiny.json", "", 858_640},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Arch: tc.arch, Transformers: "5.17.0"})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.file, got, tc.want, got-tc.want)
		}
	}
}

// What one sliding and one full-attention layer of Gemma 4 keep for
// backward, in bf16, one sequence of 64 tokens: the saved storages of the
// 4-layer model less the 2-layer one's (layer_types S, F, S, F), measured
// by tools/oracle/gemma4_saved.py on the CPU (torch 2.15.0, transformers
// 5.17.0, saved_tensors_hooks, storages deduplicated, parameters
// excluded) less the layer_scalar buffers the in-place product saves
// (2 bytes a layer, the buffer itself: no memory):
//
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-tiny.json sdpa 64 2 4
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-moe-tiny.json eager 64 2 4
//
// One gap is named: torch._grouped_mm's backward keeps the experts'
// offsets (int32 [experts], 16 bytes a layer here), which memsh's
// grouped_mm lowering (nn/moe_hf.go, every transformers 5 MoE family)
// leaves out.
//
// The 2-layer model's whole count is the oracle's less the same named
// gaps and those TestSDPAGQAAsTransformers names for Llama: the rotary
// cos and sin tables q * cos saves, one pair a layer type (2 x 64 tokens
// x (32 + 64) x 2 B), and the 8-byte tail of the shifted labels; and the
// embedding's embed_scale buffer (2 B).
func TestGemma4Saves(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, attn string
		measured   [2]int64 // 2 and 4 layers
		offsets    int64    // grouped_mm's offsets of two layers
	}{
		{"gemma4-tiny.json", "sdpa", [2]int64{1_601_298, 2_897_430}, 0},
		{"gemma4-tiny.json", "eager", [2]int64{1_812_242, 3_319_318}, 0},
		{"gemma4-moe-tiny.json", "sdpa", [2]int64{2_245_682, 4_186_198}, 2 * 4 * 4},
		{"gemma4-moe-tiny.json", "eager", [2]int64{2_456_626, 4_608_086}, 2 * 4 * 4},
	} {
		var saved [2]int64
		for i, n := range []int{2, 4} {
			types := []any{"sliding_attention", "full_attention", "sliding_attention", "full_attention"}[:n]
			data := shrinkConfig(t, tc.file, map[string]any{"num_hidden_layers": n, "layer_types": types})
			m, err := hf.FromConfigOptions(data, hf.Options{Attn: tc.attn, Transformers: "5.17.0"})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Runtime = cpu
			saved[i] = evalPlan(t, p).SavedActivations
		}
		whole := tc.measured[0] - 2*2 - 2 - tc.offsets - 2*64*(32+64)*2 - 8
		if saved[0] != whole {
			t.Errorf("%s %s: the 2-layer model saves %d bytes, want %d (%+d)", tc.file, tc.attn, saved[0], whole, saved[0]-whole)
		}
		want := tc.measured[1] - tc.measured[0] - 2*2 - tc.offsets
		if got := saved[1] - saved[0]; got != want {
			t.Errorf("%s %s: two layers save %d bytes, want %d (%+d, %+.2f %%)", tc.file, tc.attn, got, want, got-want, 100*float64(got-want)/float64(want))
		}
	}
}
