package nn

import "testing"

// The sizes smart_resize gives, as transformers 5.25.0's own function
// computes them (image_processing_glm4v.py, run alone: its module imports
// torchvision, not installed here; the command in tools/oracle/glm4v.py's
// transformers_smart_resize): frames of h x w pixels, patches of 14 merged
// 2 x 2, within the image processor's pixel budget (two frames) or the
// video processor's (a video's frames).
func TestGlm4vResizeAsTransformers(t *testing.T) {
	v := &Glm4vVisionTower{Patch: 14, Merge: 2, Temporal: 2}
	for _, tc := range []struct {
		frames, h, w, maxPixels int64
		wantH, wantW            int64
	}{
		{2, 112, 168, glmImagePixels, 112, 168},
		{2, 20, 40, glmImagePixels, 56, 112},    // scaled to 28 x 56, then up to the minimum
		{2, 70, 70, glmImagePixels, 84, 84},     // under the minimum
		{2, 142, 142, glmImagePixels, 140, 140}, // rounded down
		{2, 200, 300, glmImagePixels, 196, 308}, // rounded each way
		{2, 1080, 1920, glmImagePixels, 1092, 1932},
		{2, 3000, 4000, glmImagePixels, 2100, 2800}, // over the budget
		{2, 4000, 30, glmImagePixels, 4004, 28},
		{32, 1080, 1920, glmVideoPixels, 896, 1596},
		{16, 720, 1280, glmVideoPixels, 728, 1288},
		{5, 56, 84, glmVideoPixels, 56, 84},
	} {
		h, w, err := v.resize(tc.frames, tc.h, tc.w, tc.maxPixels)
		if err != nil || h != tc.wantH || w != tc.wantW {
			t.Errorf("%d frames of %dx%d: %dx%d (%v), transformers %dx%d", tc.frames, tc.h, tc.w, h, w, err, tc.wantH, tc.wantW)
		}
	}
	if _, _, err := v.resize(2, 10, 2500, glmImagePixels); err == nil {
		t.Error("an aspect ratio of 250 resized; the processor refuses it")
	}
}

// The text Glm4vProcessor writes around each temporal group of a video:
// begin_of_image and end_of_image, then int(t) seconds, t the group's
// first frame (frame i at i/fps), a token a run of up to three digits.
func TestGlm4vVideoText(t *testing.T) {
	for _, tc := range []struct {
		frames, groups int64
		fps            float64
		want           int64
	}{
		{4, 2, 2, 2 * 3},              // 0, 1 s
		{5, 3, 1, 3 * 3},              // 0, 2, 4 s
		{2400, 1200, 1, 1200*3 + 700}, // 700 stamps of four digits (1000 ... 2398 s): two runs each
	} {
		if got := glm4vVideoText(tc.frames, tc.groups, tc.fps); got != tc.want {
			t.Errorf("%d frames at %g a second: %d tokens, want %d", tc.frames, tc.fps, got, tc.want)
		}
	}
}
