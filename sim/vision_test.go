package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Qwen2.5-VL's dynamic resolution: a 448 x 448 image is 32 x 32 patches of
// 14 pixels (1,024 patches of 3 x 2 x 14 x 14 values), merged 2 x 2 into
// 256 image tokens that take their place among the seq tokens. The
// processor's fp32 patches stay on the device for the step; the window
// blocks attend within 8 x 8 patches, the full blocks within the image.
func TestQwen25VLImages(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "qwen2.5-vl-3b-instruct.json"), "flash")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Batch, p.Seq = 2, 1024
	p.Images = core.Images{Count: 3, Height: 448, Width: 448}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var pix, tokens []int64
	for _, v := range prog.Values {
		switch {
		case strings.HasSuffix(v.Name, "visual.pixel_values"):
			pix = v.Shape
		case strings.HasSuffix(v.Name, "merger.mlp.2.out"):
			tokens = v.Shape
		}
	}
	// 2 samples x 3 images x 1,024 patches of 1,176 values; 6 x 256 tokens of 2,048
	if len(pix) != 2 || pix[0] != 6144 || pix[1] != 1176 || len(tokens) != 2 || tokens[0] != 1536 || tokens[1] != 2048 {
		t.Errorf("pixel patches %v, image tokens %v; want [6144 1176] and [1536 2048]", pix, tokens)
	}
	with := evalPlan(t, p)
	p.Images = core.Images{}
	without := evalPlan(t, p)
	if with.SavedActivations <= without.SavedActivations || with.States.Params != without.States.Params {
		t.Errorf("images: saved %d vs %d bytes, weights %d vs %d", with.SavedActivations, without.SavedActivations, with.States.Params, without.States.Params)
	}
	p.Images = core.Images{Count: 5, Height: 448, Width: 448} // 1,280 tokens
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "5 images of 448x448 pixels: 1280 image tokens a sample, more than seq=1024") {
		t.Errorf("too many image tokens: %v", err)
	}
	text := tinyPlan(t, tinyLM())
	text.Images = core.Images{Count: 1, Height: 448, Width: 448}
	if err := text.Validate(); err == nil || !strings.Contains(err.Error(), "has no vision tower") {
		t.Errorf("images on a text model: %v", err)
	}
	if _, err := hf.FromConfig(readHF(t, "qwen2.5-vl-3b-instruct.json"), "eager"); err == nil || !strings.Contains(err.Error(), "eager attention is not modelled") {
		t.Errorf("eager vision attention: %v", err)
	}
}
