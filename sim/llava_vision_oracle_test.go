package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images of a tiny LLaVA add to the tensors autograd keeps for
// the backward, parameters and buffers excluded, against
// LlavaForConditionalGeneration (transformers 5.25.0, torch 2.15.0, CPU):
//
//	/work/venv-t/bin/python tools/oracle/llava.py ../../sim/testdata/hf/llava-tiny-last.json --saved COUNT SEQ [bf16] [eager]
//
// (the harness counts what the graph still holds when the backward starts,
// the forward's output dropped: vl_harness.saved_at_backward).
// llava-tiny-last.json is llava-tiny.json with vision_feature_layer -1:
// every CLIP layer feeds the projector; the class token is dropped
// ([:, 1:], a view for one image, a copy linear_1 folds and saves for
// more). With -2 (llava-tiny.json, llava-1.5's) the last layer runs but
// nothing reads it: its saved tensors die with the forward's output.
// The harness once counted 132,488 B there for one image: its pack hook
// returned each saved tensor itself, which makes every saved output and
// its node a reference cycle that keeps the graph above it alive (the
// last layer's up to quick_gelu's sigmoid); it now packs detached aliases.
func TestLlavaVisionSavesAsTransformers(t *testing.T) {
	checkImagesSaveCases(t, "llava-tiny-last.json", hf.Options{Attn: "sdpa"}, 256_544, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", false, 143_368},
		{core.Images{Count: 2, Height: 56, Width: 56}, 64, "fp32", false, 286_480},
		{core.Images{Count: 3, Height: 56, Width: 56}, 64, "fp32", false, 429_688},
		{core.Images{Count: 2, Height: 56, Width: 56}, 64, "bf16", false, 144_088},
	})
	checkImagesSaveCases(t, "llava-tiny.json", hf.Options{Attn: "sdpa"}, 256_544, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", false, 112_360},
		{core.Images{Count: 2, Height: 56, Width: 56}, 64, "fp32", false, 224_464},
	})
	checkImagesSaveCases(t, "llava-tiny-last.json", hf.Options{Attn: "eager"}, 256_544, []imagesSaveCase{
		{core.Images{Count: 2, Height: 56, Width: 56}, 64, "fp32", false, 312_592},
	})
}
