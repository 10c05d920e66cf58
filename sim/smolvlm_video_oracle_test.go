package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// What SmolVLM2's videos add to the storages autograd saves in a tiny
// SmolVLM (sim/testdata/hf/smolvlm-tiny.json: tiles of 64 pixels in
// patches of 8, scale_factor 4: 4 image tokens a tile), the step with the
// videos minus the same step with text tokens in place of their <image>
// ones, as tools/oracle/smolvlm_video.py measures it (transformers
// 5.25.0, torch 2.15.0, on the CPU; parameters and buffers excluded):
//
//	/work/venv-t/bin/python smolvlm_video.py ../../sim/testdata/hf/smolvlm-tiny.json 1 3 128 [bf16] [ckpt] [eager]
//	/work/venv-t/bin/python smolvlm_video.py ../../sim/testdata/hf/smolvlm-tiny.json 2 4 256
//	/work/venv-t/bin/python smolvlm_video.py ../../sim/testdata/hf/smolvlm-tiny.json 1 5 256 bf16 eager
//
// SmolVLMVideoProcessor resizes every frame to one tile (max_image_size,
// the tile as for images) whatever the video's size, so a frame costs what
// an unsplit image does, and 640 x 360 frames cost what 64 x 64 ones do;
// SmolVLMProcessor writes each frame as one unsplit image: 7 tokens with
// its tags.
func TestSmolVLMVideosSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		videos    core.Videos
		seq       int64
		precision string
		attn      string
		ckpt      bool
		want      int64
	}{
		{core.Videos{Count: 1, Frames: 3, Height: 360, Width: 640, FPS: 1}, 128, "fp32", "sdpa", false, 798_848},
		{core.Videos{Count: 1, Frames: 3, Height: 64, Width: 64, FPS: 1}, 128, "fp32", "sdpa", false, 798_848},
		{core.Videos{Count: 2, Frames: 4, Height: 480, Width: 270, FPS: 2}, 256, "fp32", "sdpa", false, 2_130_176},
		{core.Videos{Count: 1, Frames: 3, Height: 360, Width: 640, FPS: 1}, 128, "bf16", "sdpa", false, 401_792},
		{core.Videos{Count: 1, Frames: 3, Height: 360, Width: 640, FPS: 1}, 128, "fp32", "sdpa", true, 248_960},
		{core.Videos{Count: 1, Frames: 3, Height: 360, Width: 640, FPS: 1}, 128, "bf16", "sdpa", true, 125_312},
		{core.Videos{Count: 1, Frames: 3, Height: 360, Width: 640, FPS: 1}, 128, "fp32", "eager", false, 992_384},
		{core.Videos{Count: 1, Frames: 5, Height: 360, Width: 640, FPS: 1}, 256, "bf16", "eager", false, 1_156_096},
	} {
		p := visionPlan(t, "smolvlm-tiny.json", hf.Options{Attn: tc.attn}, 170_592, tc.precision)
		p.Seq = tc.seq
		if tc.ckpt {
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		}
		p.Videos = tc.videos
		with := evalPlan(t, p).SavedActivations
		p.Videos = core.Videos{}
		without := evalPlan(t, p).SavedActivations
		if got := with - without; got != tc.want {
			t.Errorf("%v %s %s ckpt %v: the videos add %d saved bytes, transformers %d (%+d)", tc.videos, tc.precision, tc.attn, tc.ckpt, got, tc.want, got-tc.want)
		}
		// the tokens: seq fits the frames' tokens and tags exactly, one less is refused
		tokens := tc.videos.Count * tc.videos.Frames * 7
		p.Videos, p.Seq = tc.videos, tokens
		if _, err := Evaluate(p, core.Options{}); err != nil {
			t.Errorf("%v: seq=%d (the frames' tokens) refused: %v", tc.videos, tokens, err)
		}
		p.Seq = tokens - 1
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "more than seq=") {
			t.Errorf("%v: seq=%d, one less than the frames' tokens: %v, want the seq error", tc.videos, tokens-1, err)
		}
	}
}

// Idefics3's processor has no videos (videos= is refused naming the
// tower), and SmolVLM2 with images and videos in one step is refused.
func TestSmolVLMVideosRefused(t *testing.T) {
	vd := core.Videos{Count: 1, Frames: 3, Height: 64, Width: 64, FPS: 1}
	p := visionPlan(t, "idefics3-tiny.json", hf.Options{Attn: "sdpa"}, 144_480, "fp32")
	p.Videos = vd
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "takes images only (its vision tower: idefics3_vision)") {
		t.Errorf("idefics3 with videos: %v, want the images-only error", err)
	}
	p = visionPlan(t, "smolvlm-tiny.json", hf.Options{Attn: "sdpa"}, 170_592, "fp32")
	p.Seq, p.Videos, p.Images = 256, vd, core.Images{Count: 1, Height: 64, Width: 64}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "images and videos in one step is not modelled") {
		t.Errorf("smolvlm with images and videos: %v, want the refusal", err)
	}
}

// SmolVLM2-500M-Video-Instruct's frames (its config.json: tiles of 512
// pixels in patches of 16, scale_factor 4) are 64 image tokens and 3 tags
// each; SmolVLM-256M-Instruct (idefics3) reads no videos.
func TestSmolVLMFrameTokens(t *testing.T) {
	for _, tc := range []struct {
		config string
		videos bool
		frame  int64
	}{
		{"smolvlm2-500m-video-instruct.json", true, 67},
		{"smolvlm-256m-instruct.json", false, 67},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(tc.config, err)
		}
		v := layerOf[*nn.Idefics3Vision](m)
		if v == nil || v.ReadsVideos() != tc.videos || v.FrameTokens() != tc.frame || v.VideoTokens(64) != 64*tc.frame {
			t.Errorf("%s: reads videos %v, %d tokens a frame; want %v, %d", tc.config, v != nil && v.ReadsVideos(), v.FrameTokens(), tc.videos, tc.frame)
		}
	}
}
