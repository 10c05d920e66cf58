package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Ministral's parameters on the meta device (transformers 5.25.0):
// ministral-tiny.json 106,816 (64 wide, 4 heads of 16, 2 kv heads, MLP
// 128, untied); ministral-8b-instruct-2410.json 8,019,808,256, the
// Ministral-8B-Instruct-2410 card's 8.02B.
func TestMinistralParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"ministral-tiny.json":             106_816,
		"ministral-8b-instruct-2410.json": 8_019_808_256,
	})
}

// What Ministral's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): ministral-tiny.json, 2
// samples of 32 tokens, layer 0 sliding over 16 keys, layer 1 full:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/ministral-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Mistral's layer; the sliding layer's SDPA gets its [1, 1, 32, 32] bool
// mask, the full layer's runs is_causal without one.
func TestMinistralSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"ministral-tiny.json", "fp32", "sdpa", 424_708, 704_772},
		{"ministral-tiny.json", "fp32", "eager", 448_260, 776_452},
		{"ministral-tiny.json", "bf16", "sdpa", 271_108, 428_292},
		{"ministral-tiny.json", "bf16", "eager", 315_140, 528_644},
	})
}

// ministral under 4.56.2 is refused (the 4.57.0 wheel is the first with
// models/ministral); without layer_types every layer slides over
// sliding_window, 4096 when the config has none (MinistralConfig), and
// none slides when it is null; a null window under sliding layer_types is
// refused, as transformers 5.25.0's create_sliding_window_causal_mask
// raises ValueError ("Could not find a `sliding_window` argument").
func TestMinistralConfig(t *testing.T) {
	tiny := string(readHF(t, "ministral-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.56.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "ministral" needs transformers 4.57 or later`) {
		t.Errorf("transformers 4.56.2: error %v, want one naming 4.57", err)
	}
	noTypes := strings.Replace(tiny, `"layer_types": ["sliding_attention", "full_attention"],`, "", 1)
	for _, tc := range []struct {
		name, config string
		windows      []int64 // each layer's window, 0 for full attention
		err          string
	}{
		{"layer_types", tiny, []int64{16, 0}, ""},
		{"no layer_types", noTypes, []int64{16, 16}, ""},
		{"no layer_types, no window", strings.Replace(noTypes, `"sliding_window": 16,`, "", 1), []int64{4096, 4096}, ""},
		{"no layer_types, null window", strings.Replace(noTypes, `"sliding_window": 16,`, `"sliding_window": null,`, 1), []int64{0, 0}, ""},
		{"layer_types, null window", strings.Replace(tiny, `"sliding_window": 16,`, `"sliding_window": null,`, 1), nil,
			`"sliding_window" is null, but layer_types has sliding_attention layers`},
	} {
		m, err := hf.FromConfig([]byte(tc.config), "sdpa")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := attentionWindows(t, m); !slices.Equal(got, tc.windows) {
			t.Errorf("%s: windows %v, want %v", tc.name, got, tc.windows)
		}
	}
}

// attentionWindows lists each decoder layer's sliding window (0: full
// attention), the layers of the model's stack in order.
func attentionWindows(t *testing.T, m *core.Model) []int64 {
	t.Helper()
	var stack *core.Repeat
	core.Walk(m.Layers[0], "", func(_ string, l core.Layer) {
		if r, ok := l.(*core.Repeat); ok && stack == nil {
			stack = r
		}
	})
	if stack == nil {
		t.Fatal("no stack of layers")
	}
	var out []int64
	for i := int64(0); i < stack.Count(); i++ {
		core.Walk(stack.Block(i), "", func(_ string, l core.Layer) {
			if a, ok := l.(*nn.Attention); ok {
				out = append(out, a.Window)
			}
		})
	}
	return out
}
