package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What videos add to the storages autograd saves in the tiny Qwen2-VL,
// Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE and Qwen3.5 models of
// TestQwen2VLImagesSaveAsTransformers, TestQwen25VLImagesSaveAsTransformers and
// TestQwen3VLImagesSaveAsTransformers (fp32, sdpa), and the tokens they add
// to a sample, as tools/oracle/qwenvl_video.py measures them
// (transformers 5.25.0, torch 2.15.0, on the CPU; pixel_values_videos and
// video_grid_thw as the video processor makes them, the frames padded to
// an even count, mm_token_type_ids 2 on the video tokens):
//
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2-vl-tiny.json 1 4 112 168 64
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2-vl-tiny.json 2 3 140 140 128
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 1 4 112 168 64
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 2 3 140 140 128
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-tiny.json 1 4 96 128 64
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-tiny.json 1 5 64 96 64 1
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-moe-tiny.json 1 4 96 128 64
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3.5-vl-tiny.json 1 4 96 128 64
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-tiny.json 1 48 32 32 256
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-tiny.json 2 7 32 32 128 0.5
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-tiny.json 1 4 96 128 64 2 bf16
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 1 5 112 168 128 2 bf16
//
// A video of 4 frames is 2 temporal patch groups and saves what 2 images
// of its frames' size save (1,872,448, 3,128,896 and 1,477,312 bytes, the
// figures of the image tests): the tower attends within each group as within an
// image. 3 frames are padded to 4, 5 to 6. The tokens are the video
// tokens (a quarter of each group's patches) and, for Qwen3-VL and Qwen3.5,
// the text Qwen3VLProcessor writes around each group: its timestamp
// ('<0.2 seconds>', '<1.2 seconds>' for 4 frames at 2 a second; up to
// '<23.2 seconds>' for 48; '<1.0 seconds>' ... '<12.0 seconds>' for 7 at
// 0.5) and vision_start and vision_end. In bf16 (the model cast to bf16
// as a whole, memsh's precision="bf16") the pixel patches stay fp32, as
// for images (748,672 bytes: the bf16 figure of two images).
func TestQwenVLVideosSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		config string
		params int64
		opts   hf.Options
		videos core.Videos
		seq    int64
		want   int64 // saved bytes the videos add
		tokens int64 // tokens they add to a sample
		bf16   bool
	}{
		{"qwen2-vl-tiny.json", 173_056, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 4, Height: 112, Width: 168, FPS: 2}, 64, 1_872_448, 48, false},
		{"qwen2-vl-tiny.json", 173_056, hf.Options{Attn: "sdpa"}, core.Videos{Count: 2, Frames: 3, Height: 140, Width: 140, FPS: 2}, 128, 3_900_928, 100, false},
		{"qwen2.5-vl-tiny.json", 198_304, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 4, Height: 112, Width: 168, FPS: 2}, 64, 3_128_896, 48, false},
		{"qwen2.5-vl-tiny.json", 198_304, hf.Options{Attn: "sdpa"}, core.Videos{Count: 2, Frames: 3, Height: 140, Width: 140, FPS: 2}, 128, 6_518_528, 100, false},
		{"qwen3-vl-tiny.json", 290_624, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 4, Height: 96, Width: 128, FPS: 2}, 64, 1_477_312, 40, false},
		{"qwen3-vl-tiny.json", 290_624, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 5, Height: 64, Width: 96, FPS: 1}, 64, 1_108_000, 42, false},
		{"qwen3-vl-moe-tiny.json", 291_136, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 4, Height: 96, Width: 128, FPS: 2}, 64, 1_477_312, 40, false},
		{"qwen3.5-vl-tiny.json", 297_032, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 4, Height: 96, Width: 128, FPS: 2}, 64, 1_403_200, 40, false},
		{"qwen3-vl-tiny.json", 290_624, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 48, Height: 32, Width: 32, FPS: 2}, 256, 1_477_504, 230, false},
		{"qwen3-vl-tiny.json", 290_624, hf.Options{Attn: "sdpa"}, core.Videos{Count: 2, Frames: 7, Height: 32, Width: 32, FPS: 0.5}, 128, 492_544, 74, false},
		{"qwen3-vl-tiny.json", 290_624, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 4, Height: 96, Width: 128, FPS: 2}, 64, 748_672, 40, true},
		{"qwen2.5-vl-tiny.json", 198_304, hf.Options{Attn: "sdpa"}, core.Videos{Count: 1, Frames: 5, Height: 112, Width: 168, FPS: 2}, 128, 2_541_440, 72, true},
	} {
		what, precision := tc.config+" "+core.Itoa(tc.videos.Frames)+" frames", "fp32"
		if tc.bf16 {
			what, precision = what+" bf16", "bf16"
		}
		p := visionPlan(t, tc.config, tc.opts, tc.params, precision)
		p.Seq = tc.seq
		p.Videos = tc.videos
		with := evalPlan(t, p).SavedActivations
		p.Videos = core.Videos{}
		without := evalPlan(t, p).SavedActivations
		if got := with - without; got != tc.want {
			t.Errorf("%s %v: the videos add %d saved bytes, transformers %d (%+d)", what, tc.videos, got, tc.want, got-tc.want)
		}
		// The tokens: seq fits them exactly, one less is refused.
		p.Videos, p.Seq = tc.videos, tc.tokens
		if _, err := Evaluate(p, core.Options{}); err != nil {
			t.Errorf("%s: seq=%d (the tokens the videos add) refused: %v", what, tc.tokens, err)
		}
		p.Seq = tc.tokens - 1
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "video tokens a sample") {
			t.Errorf("%s: seq=%d, one less than the videos' tokens: %v, want the seq error", what, tc.tokens-1, err)
		}
	}
}

// With images and videos in one step the tower runs twice, images first,
// as transformers 5.25.0 runs it: the videos add on top of two images of
// their frames' size what they add alone, and for Qwen3-VL the joined
// deepstack features' masks (visual_pos_masks, [1, 128] bool, and the
// image and video rows among the 48 visual ones, 48 bool each: 224 bytes)
// more:
//
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 1 4 112 168 128 2 images=2
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3-vl-tiny.json 1 4 96 128 128 2 images=2
//	/work/venv-t/bin/python qwenvl_video.py ../../sim/testdata/hf/qwen3.5-vl-tiny.json 1 4 96 128 128 2 images=2
func TestQwenVLImagesAndVideosSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		config string
		params int64
		videos core.Videos
		want   int64 // saved bytes the videos add to the images'
	}{
		{"qwen2.5-vl-tiny.json", 198_304, core.Videos{Count: 1, Frames: 4, Height: 112, Width: 168, FPS: 2}, 3_128_960},
		{"qwen3-vl-tiny.json", 290_624, core.Videos{Count: 1, Frames: 4, Height: 96, Width: 128, FPS: 2}, 1_477_600},
		{"qwen3.5-vl-tiny.json", 297_032, core.Videos{Count: 1, Frames: 4, Height: 96, Width: 128, FPS: 2}, 1_403_264},
	} {
		p := visionPlan(t, tc.config, hf.Options{Attn: "sdpa"}, tc.params, "fp32")
		p.Seq = 128
		p.Images = core.Images{Count: 2, Height: tc.videos.Height, Width: tc.videos.Width}
		p.Videos = tc.videos
		with := evalPlan(t, p)
		p.Videos = core.Videos{}
		without := evalPlan(t, p)
		if got := with.SavedActivations - without.SavedActivations; got != tc.want {
			t.Errorf("%s: the videos add %d saved bytes to the images', transformers %d (%+d)", tc.config, got, tc.want, got-tc.want)
		}
		if with.Params != without.Params || with.States != without.States {
			t.Errorf("%s: the second run of the tower counts its weights again (%d parameters, states %+v; without videos %d, %+v)",
				tc.config, with.Params, with.States, without.Params, without.States)
		}
	}
}
