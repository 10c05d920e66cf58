package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Llama 3.2 Vision's limits are errors with a hint, never a silent number.
func TestMllamaRefusals(t *testing.T) {
	tiny := string(readHF(t, "mllama-tiny.json"))
	for _, tc := range []struct {
		name, config, attn string
		tp                 int64
		want               string
	}{
		{"flash", tiny, "flash", 1, "flash attention is not modelled"},
		{"eager", tiny, "eager", 1, "eager attention is not modelled"},
		{"tp", tiny, "sdpa", 2, "data parallelism only"},
		{"output dim", strings.Replace(tiny, `"vision_output_dim": 96`, `"vision_output_dim": 64`, 1), "sdpa", 1, `"vision_config.vision_output_dim" is 64`},
		{"cross layer", strings.Replace(tiny, `"cross_attention_layers": [`, `"cross_attention_layers": [7, `, 1), "sdpa", 1, "cross_attention_layers"},
		{"no text", strings.Replace(tiny, `"text_config"`, `"text"`, 1), "sdpa", 1, `no "text_config"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := hf.FromConfig([]byte(tc.config), tc.attn)
			if err == nil {
				p := tinyPlan(t, m)
				p.Images = core.Images{Count: 1, Height: 560, Width: 560}
				p.Parallel.TP = tc.tp
				if tc.tp > 1 {
					p.Parallel.DP = 1
				}
				_, err = Evaluate(p, core.Options{})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// An image's size changes nothing (the processor pads every image to
// max_num_tiles tiles); the cross-attention layers run only with images.
func TestMllamaTilesAndSkippedLayers(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "mllama-tiny.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Seq = 32
	saved := func(im core.Images) int64 {
		p.Images = im
		return evalPlan(t, p).SavedActivations
	}
	small, large := saved(core.Images{Count: 1, Height: 100, Width: 40}), saved(core.Images{Count: 1, Height: 2240, Width: 560})
	if small != large {
		t.Errorf("a 100x40 image keeps %d bytes, a 2240x560 one %d: both are 4 tiles", small, large)
	}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	cross := 0
	for _, op := range prog.Ops {
		if strings.HasSuffix(op.Name, "cross_attn.sdpa_attention") {
			cross++
		}
	}
	if cross != 2 {
		t.Errorf("%d cross-attention kernels, want 2 (layers 1 and 3)", cross)
	}
}
