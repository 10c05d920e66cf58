package nn

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// An image's tiles through the tower and its image tokens, as the
// processors count them (LlavaNextProcessor's and
// LlavaOnevisionProcessor's _get_number_of_features, transformers 5.25.0,
// with image_size_to_num_patches; torch 2.15.0, CPU):
//
//	cd tools/oracle && /work/venv-t/bin/python llava_next.py ../../sim/testdata/hf/llava-v1.6-mistral-7b-hf.json --tokens 336x336 480x640 ...
//	cd tools/oracle && /work/venv-t/bin/python llava_next.py ../../sim/testdata/hf/llava-onevision-qwen2-7b-ov-hf.json --tokens 336x336 480x640 ...
//
// LLaVA-NeXT (CLIP-336, 24 x 24 patches a tile, five pinpoints): a
// 480 x 640 image fills 2 x 2 tiles, unpadded to 36 x 48 patches plus a
// newline a row and the base tile's 576: 2,340 tokens; 37 x 1500 keeps 2
// of 24 rows of its 1 x 3 tiles. LLaVA-OneVision (SigLIP-384, 27 x 27
// patches, 36 pinpoints, anyres_max_9): past 9 tiles' patches the grid is
// interpolated down (4000 x 3000: 6 x 5 tiles, 31 through the tower, 7,332
// tokens).
func TestAnyResLayoutAsProcessor(t *testing.T) {
	next := &LlavaVision{SquareTile: SquareTile{Image: 336, Patch: 14}, AnyRes: &AnyRes{Pinpoints: [][2]int64{{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}}}}
	var pins [][2]int64
	for h := int64(1); h <= 6; h++ {
		for w := int64(1); w <= 6; w++ {
			pins = append(pins, [2]int64{384 * h, 384 * w})
		}
	}
	ov := &LlavaVision{SquareTile: SquareTile{Image: 384, Patch: 14}, Siglip: true, KeepCLS: true, AnyRes: &AnyRes{Pinpoints: pins, MaxTiles: 9, OneImage: true}}
	for _, tc := range []struct {
		v             *LlavaVision
		h, w          int64
		tiles, tokens int64
	}{
		{next, 336, 336, 3, 1176}, {next, 480, 640, 5, 2340}, {next, 640, 480, 5, 2352}, {next, 768, 1024, 5, 2340},
		{next, 1024, 768, 5, 2352}, {next, 300, 1200, 4, 1890}, {next, 1200, 300, 4, 1944}, {next, 899, 1024, 5, 2634},
		{next, 2000, 500, 4, 1944}, {next, 37, 1500, 4, 722}, {next, 4000, 3000, 5, 2352}, {next, 384, 384, 5, 2928},
		{next, 1080, 1920, 5, 1948}, {next, 3000, 1000, 4, 2376},
		{ov, 336, 336, 2, 1485}, {ov, 480, 640, 5, 2929}, {ov, 640, 480, 5, 2943}, {ov, 768, 1024, 7, 4725},
		{ov, 1024, 768, 7, 4744}, {ov, 300, 1200, 5, 3672}, {ov, 1200, 300, 5, 3753}, {ov, 899, 1024, 10, 6551},
		{ov, 2000, 500, 13, 7371}, {ov, 37, 1500, 5, 1056}, {ov, 4000, 3000, 31, 7332}, {ov, 384, 384, 2, 1485},
		{ov, 1080, 1920, 16, 7269}, {ov, 3000, 1000, 13, 7309},
	} {
		l := tc.v.layout(core.Images{Count: 1, Height: tc.h, Width: tc.w})
		if l.Tiles != tc.tiles || l.Tokens != tc.tokens {
			t.Errorf("%d x %d (siglip %v): %d tiles, %d tokens; the processor %d, %d", tc.h, tc.w, tc.v.Siglip, l.Tiles, l.Tokens, tc.tiles, tc.tokens)
		}
	}
	// a sample of several images: OneVision runs each as its base tile and a newline
	if l := ov.layout(core.Images{Count: 2, Height: 4000, Width: 3000}); l.Tiles != 1 || l.Tokens != 27*27+1 {
		t.Errorf("OneVision, 2 images a sample: %+v, want 1 tile and 730 tokens each", l)
	}
	if l := next.layout(core.Images{Count: 2, Height: 480, Width: 640}); l.Tiles != 5 || l.Tokens != 2340 {
		t.Errorf("LLaVA-NeXT, 2 images a sample: %+v, want each tiled alone (5 tiles, 2340 tokens)", l)
	}
}
