package nn

import (
	"strings"
	"testing"
)

// PixtralGrid against PixtralProcessor's get_resize_output_image_size
// (transformers 5.25.0, run from image_processing_pixtral.py's source as
// tools/oracle/mistral3vl.py runs it) at Mistral Small 3.1's sizes:
// longest edge 1540, patches of 14 merged 2 x 2 (the processor's patch
// size 28). Small images are rounded up, large ones scaled down (floor)
// to 1540 on their longer side, never up; a side scaled under a pixel has
// no patches.
func TestPixtralGrid(t *testing.T) {
	for _, tc := range []struct{ h, w, gh, gw int64 }{
		{56, 56, 4, 4},
		{1, 1, 2, 2},
		{1540, 1540, 110, 110},
		{1541, 1541, 110, 110},
		{1080, 1920, 62, 110},
		{1920, 1080, 110, 62},
		{4000, 3000, 110, 84},
		{100, 150, 8, 12},
		{3000, 20, 110, 2},
		{27, 29, 2, 4},
		{2000, 1, 110, 0},
	} {
		gh, gw := PixtralGrid(tc.h, tc.w, 1540, 14, 2)
		if gh != tc.gh || gw != tc.gw {
			t.Errorf("%d x %d pixels: %d x %d patches, PixtralProcessor %d x %d", tc.h, tc.w, gh, gw, tc.gh, tc.gw)
		}
	}
}

// PixtralVision's checks name what is wrong.
func TestPixtralVisionValidate(t *testing.T) {
	ok := PixtralVision{Dim: 32, Layers: 2, Heads: 4, Inter: 64, Act: "swiglu", Image: 112, Patch: 14, Channels: 3, Merge: 2,
		TextDim: 64, ProjAct: "gelu", Impl: "sdpa"}
	if err := ok.Validate("v"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(v *PixtralVision)
		want string
	}{
		{"heads", func(v *PixtralVision) { v.Heads = 3 }, "attention heads (3) must divide model width (32) into heads of a multiple of 4"},
		{"head dim", func(v *PixtralVision) { v.Heads = 16 }, "into heads of a multiple of 4"},
		{"kernel", func(v *PixtralVision) { v.Impl = "flex" }, `unknown attention kernel "flex"`},
		{"merge", func(v *PixtralVision) { v.Merge = 0 }, "merge size must be positive"},
		{"llava merge", func(v *PixtralVision) { v.Llava = true }, "merge size is 2: LLaVA's projector merges no patches (1)"},
		{"huge", func(v *PixtralVision) { v.Image = 1 << 17 }, "more than memsh simulates"},
	} {
		v := ok
		tc.set(&v)
		if err := v.Validate("v"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// With LLaVA's projector (pixtral-12b) every patch is an image token, one
// break token a row: tools/oracle/mistral3vl.py on llava-pixtral-tiny.json
// lays 56 x 56 pixels out as 4 x 4 patches, 16 [IMG] tokens and 4 breaks,
// and 100 x 150 as 6 x 8, 48 and 6.
func TestPixtralLlavaTokens(t *testing.T) {
	v := PixtralVision{Image: 112, Patch: 14, Merge: 1, Llava: true}
	for _, tc := range []struct{ h, w, image, text int64 }{{56, 56, 16, 20}, {100, 150, 48, 54}} {
		if i, x := v.ImageTokens(tc.h, tc.w), v.TextTokens(tc.h, tc.w); i != tc.image || x != tc.text {
			t.Errorf("%d x %d pixels: %d image tokens of %d, want %d of %d", tc.h, tc.w, i, x, tc.image, tc.text)
		}
	}
}
