package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny Mistral 3
// (sim/testdata/hf/mistral3-tiny.json: Pixtral's tower of 2 layers 32
// wide, 4 heads, a SiLU-gated MLP of 64, patches of 14, images up to 112
// pixels, merge 2; a 2-layer Mistral text model 64 wide), the step with
// the images minus the same step with text tokens in their place, as
// tools/oracle/mistral3vl.py measures it (transformers 5.25.0, torch
// 2.15.0, sdpa, on the CPU; parameters and buffers excluded):
//
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 1 56 56 64
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 1 100 150 96
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 1 84 84 64
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 3 56 84 128
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 1 56 56 64 bf16
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 bf16
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 ckpt
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 bf16 ckpt
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 1 56 56 64 eager
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 eager
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 1 84 84 64 eager
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 bf16 eager
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 ckpt eager
//
// 56 x 56 pixels are 4 x 4 patches; 84 x 112 are 6 x 8; 100 x 150 are
// scaled to 74 x 112 and rounded up to 84 x 112 (PixtralProcessor: the
// longer side at most image_size, each a multiple of 28 pixels); 84 x 84
// are 6 x 6. The figures hold the fp32 pixel values the convolution saves
// (a bf16 copy in bf16), the patches' concatenation and ln_pre's
// statistics, the rotary cos and sin (once, in the hidden states' dtype),
// the block-diagonal mask over all the patches (once: every layer's SDPA
// saves the same tensor), per layer the RMSNorms' statistics and outputs,
// q and k after the rope, v, SDPA's output and logsumexp, o_proj's input,
// the gated MLP's; the projector's norm, the unfolded patches' copy
// merging_layer saves, linear_1's and GELU's outputs; the placeholder
// mask. Eager attention (the text model's too) keeps, per layer, what its
// matmuls and fp32 softmax keep over one score matrix of every patch of
// the micro-batch, the block mask added to it (the add keeps nothing).
// Two differences are CUDA's or the harness's, added to the measured
// figure:
//
//   - 36 patches (84 x 84) are not a multiple of 8 keys: on CUDA the
//     efficient kernel pads a copy of the mask at each call and saves it
//     instead (nn.memEffAlignment): 2 layers x 36 x 40 x 4 bytes, less the
//     36 x 36 x 4 of the one mask the CPU kernel saves;
//   - with every layer checkpointed (PixtralAttentionLayer is a
//     GradientCheckpointingLayer; use_reentrant=False), memsh counts the
//     rotary cos and sin beside what autograd packs: the recompute keeps
//     its arguments, position_embeddings among them, until the layers'
//     backward, where no saved-tensor hook sees them (96 patches x
//     head_dim 8 each, in the hidden states' dtype), as for Kimi K2.5
//     (TestKimiVisionSavesAsTransformers).
func TestMistral3VisionSavesAsTransformers(t *testing.T) {
	// mistral3vl.py on the meta device: 254,848 parameters, the vision
	// tower 39,456 and the projector 10,272 of them
	checkImagesSaveCases(t, "mistral3-tiny.json", hf.Options{Attn: "sdpa"}, 254_848, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "fp32", false, 127_168},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", false, 793_440},
		{core.Images{Count: 1, Height: 100, Width: 150}, 96, "fp32", false, 387_552},
		{core.Images{Count: 1, Height: 84, Width: 84}, 64, "fp32", false, 288_928 + 2*36*40*4 - 36*36*4},
		{core.Images{Count: 3, Height: 56, Width: 84}, 128, "fp32", false, 588_224},
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "bf16", false, 70_208},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", false, 436_320},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", true, 364_896 + 2*96*8*4},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", true, 195_168 + 2*96*8*2},
	})
	checkImagesSaveCases(t, "mistral3-tiny.json", hf.Options{Attn: "eager"}, 254_848, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "fp32", false, 133_824},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", false, 1_048_416},
		{core.Images{Count: 1, Height: 84, Width: 84}, 64, "fp32", false, 324_064},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", false, 857_184},
		{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", true, 364_896 + 2*96*8*4},
	})
}

// Ministral 3's text model (text_config's model_type ministral3: Mistral's
// layers, q scaled by position after the rotation) in the same tiny
// Mistral 3 (sim/testdata/hf/ministral3-vl-tiny.json: mistral3-tiny.json
// with a ministral3 text_config and Ministral3Config's default
// rope_parameters), as tools/oracle/mistral3vl.py measures it on 64 tokens
// with one 56 x 56 image (transformers 5.25.0, torch 2.15.0, CPU):
//
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/ministral3-vl-tiny.json 1 56 56 64 [bf16|eager]
//
// Text alone it keeps 881,420 bytes (fp32, sdpa), 614,924 (bf16) and
// 1,043,212 (eager) where mistral3-tiny.json keeps 880,908, 614,668 and
// 1,042,700: each of the 2 layers keeps its [1, 1, 64, 1] scale in q's
// dtype. The images add what they add to mistral3-tiny.json.
func TestMinistral3TextSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		attn, precision string
		more, images    int64
	}{
		{"sdpa", "fp32", 881_420 - 880_908, 127_168},
		{"sdpa", "bf16", 614_924 - 614_668, 70_208},
		{"eager", "fp32", 1_043_212 - 1_042_700, 133_824},
	} {
		saved := func(config string) int64 {
			p := visionPlan(t, config, hf.Options{Attn: tc.attn}, 254_848, tc.precision)
			p.Seq = 64
			return evalPlan(t, p).SavedActivations
		}
		if got := saved("ministral3-vl-tiny.json") - saved("mistral3-tiny.json"); got != tc.more {
			t.Errorf("%s %s: ministral3's text model keeps %d bytes more than mistral's, transformers %d", tc.attn, tc.precision, got, tc.more)
		}
		checkImagesSaveCases(t, "ministral3-vl-tiny.json", hf.Options{Attn: tc.attn}, 254_848, []imagesSaveCase{
			{core.Images{Count: 1, Height: 56, Width: 56}, 64, tc.precision, false, tc.images}})
	}
}
