package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images of a tiny LLaVA-NeXT and LLaVA-OneVision add to the
// tensors autograd keeps for the backward, parameters and buffers
// excluded, against LlavaNextForConditionalGeneration and
// LlavaOnevisionForConditionalGeneration (transformers 5.25.0, torch
// 2.15.0, CPU; the graph as the backward starts, the forward's output
// dropped):
//
//	cd tools/oracle && /work/venv-t/bin/python llava_next.py ../../sim/testdata/hf/CONFIG COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager]
//
// llava-next-tiny.json: a 3-layer CLIP tower of 56-pixel tiles (4 x 4
// patches), vision_feature_layer -2, pinpoints of 1 x 2 to 1 x 3 tiles.
// A 112 x 112 image is 2 x 2 tiles and the base image (5 through the
// tower, 88 tokens: 16 + 8 x 8 + 8 newlines); 60 x 150 is 1 x 3 tiles,
// unpadded to 4 x 10 patches (4 tiles, 60 tokens); 100 x 60 is 2 x 2
// tiles unpadded to 8 x 4 (56 tokens). llava-onevision-tiny.json: a
// 3-layer SigLIP tower of 60-pixel tiles in patches of 14 (4 x 4 patches,
// the last 4 pixels unread, as so400m's 384 in patches of 14), 36
// pinpoints of 1 to 6 tiles a side, anyres_max_9: 240 x 240 is 4 x 4
// tiles (17 through the tower) whose 16 x 16 patches are interpolated
// down to 12 x 12 (172 tokens); 64 x 160 and 160 x 64 are 2 x 3 and 3 x 2
// tiles (7 through the tower; 68 and 76 tokens); several images a sample
// run one base tile each (17 tokens with the newline). What autograd
// keeps is the tower's layers on every tile, linear_1's input (CLIP's features without the class token,
// folded into a copy), gelu's and linear_2's; pack_image_features'
// copies, slices and the interpolation keep nothing.
func TestLlavaNextSavesAsTransformers(t *testing.T) {
	next, onevision := "llava-next-tiny.json", "llava-onevision-tiny.json"
	sdpa, eager := hf.Options{Attn: "sdpa"}, hf.Options{Attn: "eager"}
	checkImagesSaveCases(t, next, sdpa, 256_608, []imagesSaveCase{
		{core.Images{Count: 1, Height: 112, Width: 112}, 128, "fp32", false, 561_128},
		{core.Images{Count: 1, Height: 60, Width: 150}, 128, "fp32", false, 448_928},
		{core.Images{Count: 2, Height: 100, Width: 60}, 256, "fp32", false, 1_122_256},
		{core.Images{Count: 3, Height: 60, Width: 150}, 256, "fp32", false, 1_346_656},
		{core.Images{Count: 1, Height: 60, Width: 150}, 128, "bf16", false, 225_616},
		{core.Images{Count: 1, Height: 60, Width: 150}, 128, "fp32", true, 218_272},
		{core.Images{Count: 2, Height: 112, Width: 112}, 256, "bf16", true, 272_936},
	})
	checkImagesSaveCases(t, next, eager, 256_608, []imagesSaveCase{
		{core.Images{Count: 1, Height: 60, Width: 150}, 128, "fp32", false, 483_744},
	})
	checkImagesSaveCases(t, onevision, sdpa, 256_768, []imagesSaveCase{
		{core.Images{Count: 1, Height: 120, Width: 120}, 128, "fp32", false, 643_648},
		{core.Images{Count: 1, Height: 240, Width: 240}, 256, "fp32", false, 2_188_224},
		{core.Images{Count: 1, Height: 64, Width: 160}, 128, "fp32", false, 901_056},
		{core.Images{Count: 1, Height: 160, Width: 64}, 128, "fp32", false, 901_056},
		{core.Images{Count: 2, Height: 64, Width: 160}, 64, "fp32", false, 257_472},
		{core.Images{Count: 3, Height: 120, Width: 120}, 64, "fp32", false, 386_176},
		{core.Images{Count: 1, Height: 240, Width: 240}, 256, "bf16", false, 1_100_768},
		{core.Images{Count: 1, Height: 240, Width: 240}, 256, "fp32", true, 1_013_184},
		{core.Images{Count: 1, Height: 64, Width: 160}, 128, "bf16", true, 208_672},
	})
	checkImagesSaveCases(t, onevision, eager, 256_768, []imagesSaveCase{
		{core.Images{Count: 1, Height: 240, Width: 240}, 256, "fp32", false, 2_384_064},
	})
}

// What LLaVA-OneVision's videos add to the saved tensors (the same
// harness, transformers 5.25.0, torch 2.15.0, CPU):
//
//	cd tools/oracle && /work/venv-t/bin/python llava_next.py ../../sim/testdata/hf/llava-onevision-tiny.json --video COUNT FRAMES SEQ [bf16] [ckpt] [eager] [images=N]
//
// Every frame runs through the tower at image_size (60 pixels, 4 x 4
// patches), its projected patches pooled 2 x 2 by bilinear interpolation
// (apply_pooling: copies and a view, nothing saved), one image_newline a
// video: 4 x frames + 1 tokens. With images=2 the tower runs on two images
// first (one base tile each, several a sample) and again on the frames,
// the same weights: what the videos add to the images'.
func TestLlavaOnevisionVideosSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		videos    core.Videos
		seq       int64
		precision string
		opts      hf.Options
		ckpt      bool
		images    int64
		want      int64
	}{
		{core.Videos{Count: 1, Frames: 3, Height: 60, Width: 60, FPS: 1}, 64, "fp32", hf.Options{Attn: "sdpa"}, false, 0, 386_176},
		{core.Videos{Count: 2, Frames: 4, Height: 60, Width: 60, FPS: 1}, 128, "fp32", hf.Options{Attn: "sdpa"}, false, 0, 1_029_760},
		{core.Videos{Count: 1, Frames: 8, Height: 60, Width: 60, FPS: 1}, 128, "bf16", hf.Options{Attn: "sdpa"}, false, 0, 518_016},
		{core.Videos{Count: 1, Frames: 8, Height: 60, Width: 60, FPS: 1}, 128, "fp32", hf.Options{Attn: "eager"}, false, 0, 1_121_920},
		{core.Videos{Count: 2, Frames: 4, Height: 60, Width: 60, FPS: 1}, 128, "fp32", hf.Options{Attn: "sdpa"}, true, 0, 476_800},
		{core.Videos{Count: 1, Frames: 8, Height: 60, Width: 60, FPS: 1}, 128, "bf16", hf.Options{Attn: "sdpa"}, true, 0, 238_464},
		{core.Videos{Count: 1, Frames: 4, Height: 60, Width: 60, FPS: 1}, 128, "fp32", hf.Options{Attn: "sdpa"}, false, 2, 514_944},
	} {
		p := visionPlan(t, "llava-onevision-tiny.json", tc.opts, 256_768, tc.precision)
		p.Seq = tc.seq
		if tc.ckpt {
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		}
		if tc.images > 0 {
			p.Images = core.Images{Count: tc.images, Height: 60, Width: 60}
		}
		p.Videos = tc.videos
		with := evalPlan(t, p)
		p.Videos = core.Videos{}
		without := evalPlan(t, p)
		if got := with.SavedActivations - without.SavedActivations; got != tc.want {
			t.Errorf("%v %s ckpt %v images %d: the videos add %d saved bytes, transformers %d (%+d)", tc.videos, tc.precision, tc.ckpt, tc.images, got, tc.want, got-tc.want)
		}
		if tc.images > 0 && (with.Params != without.Params || with.States != without.States) {
			t.Errorf("%v: the tower's second run counts its weights again (%d parameters, states %+v; without videos %d, %+v)",
				tc.videos, with.Params, with.States, without.Params, without.States)
		}
		// the tokens: seq fits them exactly, one less is refused
		tokens := tc.images*17 + tc.videos.Count*(4*tc.videos.Frames+1)
		p.Videos, p.Seq = tc.videos, tokens
		if _, err := Evaluate(p, core.Options{}); err != nil {
			t.Errorf("%v: seq=%d (the image and video tokens) refused: %v", tc.videos, tokens, err)
		}
		p.Seq = tokens - 1
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "more than seq=") {
			t.Errorf("%v: seq=%d, one less than the tokens: %v, want the seq error", tc.videos, tokens-1, err)
		}
	}
}
