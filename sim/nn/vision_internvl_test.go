package nn

import "testing"

// InternVLTiles against GotOcr2ImageProcessor's own get_optimal_tiled_canvas
// (image_processing_got_ocr2.py, transformers 5.25.0, run from its source
// as tools/oracle/internvl.py runs it) at InternVL's tiles of 448 pixels,
// 1 to 12 of them: the grid's tiles, and the thumbnail when there are
// several.
func TestInternVLTiles(t *testing.T) {
	for _, tc := range []struct{ h, w, tiles int64 }{
		{448, 448, 1},
		{224, 224, 1},
		{1080, 1920, 4*2 + 1},
		{1920, 1080, 2*4 + 1},
		{500, 1500, 3 + 1},
		{3000, 4000, 4*3 + 1},
		{100, 2000, 12 + 1},
		{768, 1024, 4*3 + 1},  // 4:3 ties 4 x 3 with nothing smaller; the area is over half of it
		{1024, 1024, 3*3 + 1}, // 1:1 ties 1 x 1, 2 x 2 and 3 x 3; the area is over half of 3 x 3's
		{2048, 2048, 3*3 + 1},
	} {
		if got := InternVLTiles(tc.h, tc.w, 448, 12); got != tc.tiles {
			t.Errorf("%dx%d: %d tiles, GotOcr2ImageProcessor %d", tc.h, tc.w, got, tc.tiles)
		}
	}
}
