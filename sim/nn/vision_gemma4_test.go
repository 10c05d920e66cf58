package nn

import "testing"

// Gemma4ImageProcessor's resize, as transformers 5.17.0's
// get_aspect_ratio_preserving_size computes it (run from its source by
// tools/oracle/gemma4vl.py's processor_function, patches of 16, pooling
// 3): the size, the soft tokens, and the sizes it refuses.
func TestGemma4Resized(t *testing.T) {
	for _, tc := range []struct {
		h, w, soft     int64
		th, tw, tokens int64
	}{
		{448, 448, 280, 768, 768, 256},
		{1024, 512, 280, 1104, 528, 253},
		{4000, 3000, 280, 912, 672, 266},
		{100, 3000, 280, 144, 4368, 273},
		{40, 4000, 280, 48, 8016, 167},
		{3000, 40, 70, 3360, 48, 70},
		{1, 1, 280, 768, 768, 256},
		{10, 100000, 280, 48, 13440, 280},
		{896, 896, 1120, 1584, 1584, 1089},
	} {
		v := &Gemma4VisionTower{Patch: 16, Pool: 3, MaxSoftTokens: tc.soft}
		th, tw, ok := v.Resized(tc.h, tc.w)
		if !ok || th != tc.th || tw != tc.tw || v.ImageTokens(tc.h, tc.w) != tc.tokens {
			t.Errorf("%dx%d (%d soft tokens): %dx%d (%v), %d tokens; want %dx%d, %d", tc.h, tc.w, tc.soft, th, tw, ok, v.ImageTokens(tc.h, tc.w), tc.th, tc.tw, tc.tokens)
		}
	}
}
