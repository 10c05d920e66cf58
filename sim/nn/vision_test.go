package nn

import "testing"

// The processor's smart_resize rounds each side to the nearest multiple of
// patch x merge pixels with Python's round (halves to even), and the
// window blocks' keys per patch are the sum of each window's patches
// squared over the image's patches (get_window_index: windows of
// window/merge/patch merged units, the last cut short). Counted by hand.
func TestVisionTowerGridAndWindows(t *testing.T) {
	v := &VisionTower{Patch: 14, Merge: 2, Window: 112}
	for _, tc := range []struct{ pixels, grid int64 }{
		{448, 32}, // 16 x 28 pixels
		{70, 4},   // 2.5 rounds to 2
		{98, 8},   // 3.5 rounds to 4
		{10, 2},   // at least one merged unit
	} {
		if got := v.grid(tc.pixels); got != tc.grid {
			t.Errorf("grid(%d) = %d, want %d", tc.pixels, got, tc.grid)
		}
	}
	for _, tc := range []struct{ gh, gw, keys int64 }{
		{32, 32, 64}, // 4 x 4 windows of 8 x 8 patches
		// 28 patches a side: windows of 8, 8, 8 and 4 (14 merged units
		// in windows of 4): (3*64 + 16)^2 / 784 = 55.2 -> 56
		{28, 28, 56},
		{4, 6, 24}, // smaller than one window: the whole image
	} {
		if got := v.windowKeys(tc.gh, tc.gw); got != tc.keys {
			t.Errorf("windowKeys(%d, %d) = %d, want %d", tc.gh, tc.gw, got, tc.keys)
		}
	}
}
