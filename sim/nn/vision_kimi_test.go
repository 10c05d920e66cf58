package nn

import (
	"strings"
	"testing"
)

// KimiGrid against Kimi_K25ImageProcessor's navit_resize (transformers
// 5.17.0, at its defaults: max_patches 16384, 512 patches a side, patches
// of 14 merged 2 x 2), as tools/oracle/kimivis.py's copy of it prints the
// padded grid for each size: small images padded up, large ones scaled
// down to the patch budget or the side limit, never up.
func TestKimiGrid(t *testing.T) {
	for _, tc := range []struct{ h, w, gh, gw int64 }{
		{56, 56, 4, 4},
		{100, 150, 8, 12},
		{1, 1, 2, 2},
		{448, 448, 32, 32},
		{1080, 1920, 78, 138},
		{4000, 3000, 150, 112},
		{14, 20000, 2, 512},
		{8000, 8000, 130, 130},
		{2000, 30, 144, 4},
	} {
		gh, gw := KimiGrid(tc.h, tc.w, 14, 2, 16384, 512)
		if gh != tc.gh || gw != tc.gw {
			t.Errorf("%d x %d pixels: %d x %d patches, navit_resize %d x %d", tc.h, tc.w, gh, gw, tc.gh, tc.gw)
		}
	}
}

// KimiVision's checks name what is wrong.
func TestKimiVisionValidate(t *testing.T) {
	ok := KimiVision{Dim: 32, Layers: 2, Heads: 4, Inter: 64, Act: "gelu", Patch: 14, PosH: 8, PosW: 8, PosTime: 4, Merge: 2,
		ProjDim: 32, TextDim: 64, MaxPatches: 16384, MaxSide: 512, Impl: "sdpa"}
	if err := ok.Validate("v"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(v *KimiVision)
		want string
	}{
		{"heads", func(v *KimiVision) { v.Heads = 3 }, "attention heads (3) must divide model width (32) into heads of a multiple of 4"},
		{"head dim", func(v *KimiVision) { v.Heads = 16 }, "into heads of a multiple of 4"},
		{"projector", func(v *KimiVision) { v.ProjDim = 48 }, "projector norm width (48) must be model width (32)"},
		{"eager", func(v *KimiVision) { v.Impl = "eager" }, "eager attention is not modelled"},
		{"merge", func(v *KimiVision) { v.Merge = 0 }, "merge size must be positive"},
		{"huge", func(v *KimiVision) { v.Dim = 1 << 21 }, "more than memsh simulates"},
	} {
		v := ok
		tc.set(&v)
		if err := v.Validate("v"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
