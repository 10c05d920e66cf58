package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What images add to the storages autograd saves in a tiny GLM-4.1V
// (sim/testdata/hf/glm4v-tiny.json: a 3-block tower 32 wide, patches of
// 14 pixels, a 4 x 4 position table, MLPs 64 wide, a merger of 48; a
// 2-layer GLM-4 text model 64 wide), trained with sdpa: the step with the
// images minus the same step with text tokens in their place, as
// tools/oracle/glm4v.py measures it (transformers 5.25.0, torch 2.15.0,
// on the CPU; each image resized by Glm4vImageProcessor's own
// smart_resize):
//
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 2 112 168 64
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 1 200 300 128
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 3 56 84 64
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 1 20 40 64
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 2 112 168 64 bf16
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 2 112 168 64 bf16 ckpt
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 2 112 168 64 ckpt
//
// 112 x 168 pixels are 8 x 12 patches; 200 x 300 are resized to 196 x 308
// (14 x 22); 56 x 84 hold fewer than the processor's 112² pixels over two
// frames and grow to 84 x 112; 20 x 40 are scaled to 28 x 56, then to
// 56 x 112. The figures are, in fp32: the pixel patches the Conv3d saves,
// post_conv_layernorm's input, rsqrt and normed rows, grid_sample's
// sampling grid ([1, patches, 1, 2] fp32), the rotary cos and sin, per
// block its RMS norms', q and k after the rope, the qkv output, each
// image's SDPA output and logsumexp, their concatenation, the gated MLP's;
// post_layernorm's, its output (which the downsample convolution saves),
// the merger's proj input and output, its LayerNorm's statistics and
// output, GELU's, the gated MLP's; the placeholder mask. In bf16 the pixel
// patches stay fp32 and the Conv3d saves their bf16 copy, and grid_sample
// also saves its fp32 copy of the position table. With every block
// checkpointed (Glm4vVisionBlock is a GradientCheckpointingLayer;
// use_reentrant=False) a block keeps its input, and memsh counts the
// rotary cos and sin beside what autograd packs, as for Qwen2-VL
// (TestQwen2VLImagesSaveAsTransformers): the recompute's arguments hold
// them until the blocks' backward, where no saved-tensor hook sees them.
func TestGLM4VImagesSaveAsTransformers(t *testing.T) {
	const tables = 2 * (2 * 8 * 12) * (32 / 2) * 4 // cos and sin: patches x head_dim, fp32
	// glm4v.py on the meta device: 203,808 parameters, model.visual 90,848
	// of them (Glm4vVisionTower.Params' formula).
	checkImagesSaveCases(t, "glm4v-tiny.json", hf.Options{Attn: "sdpa"}, 203_808, []imagesSaveCase{
		{im: core.Images{Count: 2, Height: 112, Width: 168}, seq: 64, precision: "fp32", want: 2_697_664},
		{im: core.Images{Count: 1, Height: 200, Width: 300}, seq: 128, precision: "fp32", want: 4_327_528},
		{im: core.Images{Count: 3, Height: 56, Width: 84}, seq: 64, precision: "fp32", want: 2_023_264},
		{im: core.Images{Count: 1, Height: 20, Width: 40}, seq: 64, precision: "fp32", want: 449_664},
		{im: core.Images{Count: 2, Height: 112, Width: 168}, seq: 64, precision: "bf16", want: 1_467_648},
		{im: core.Images{Count: 2, Height: 112, Width: 168}, seq: 64, precision: "bf16", ckpt: true, want: 622_848 + tables},
		{im: core.Images{Count: 2, Height: 112, Width: 168}, seq: 64, precision: "fp32", ckpt: true, want: 1_189_312 + tables},
	})
	// glm4v-moe-tiny.json: the same tower before GLM-4.5V's MoE text model
	// (2 layers, the second of 4 experts, 2 a token, and a shared one):
	// the images add what they add to glm4v's, the placeholder mask
	// included (Glm4vMoeModel.forward joins them as Glm4vModel does).
	//
	//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-moe-tiny.json 2 112 168 64
	//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-moe-tiny.json 1 200 300 128
	//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-moe-tiny.json 2 112 168 64 bf16
	checkImagesSaveCases(t, "glm4v-moe-tiny.json", hf.Options{Attn: "sdpa"}, 209_952, []imagesSaveCase{
		{im: core.Images{Count: 2, Height: 112, Width: 168}, seq: 64, precision: "fp32", want: 2_697_664},
		{im: core.Images{Count: 1, Height: 200, Width: 300}, seq: 128, precision: "fp32", want: 4_327_528},
		{im: core.Images{Count: 2, Height: 112, Width: 168}, seq: 64, precision: "bf16", want: 1_467_648},
	})
}

// What videos add, and the tokens they add to a sample, in the model of
// TestGLM4VImagesSaveAsTransformers, as tools/oracle/glm4v.py measures
// them (video=FRAMES, fps=F: the frames padded to an even count, resized
// by the video processor's smart_resize over all of them, each temporal
// group's tokens between begin_of_image and end_of_image followed by its
// timestamp, all under image_token_id with mm_token_type_ids 2):
//
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 1 112 168 128 video=4
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 1 56 84 128 video=5 fps=1
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 2 56 84 128 video=4 fps=0.5
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-tiny.json 1 112 168 128 video=4 bf16
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-moe-tiny.json 1 112 168 128 video=4
//
// A video of 4 frames is 2 groups, each a segment of the tower as an
// image is: it saves what two images of its frames' size save (2,697,664
// bytes) and a placeholder mask 64 bytes longer (seq 128). 5 frames are
// padded to 6 (3 groups of 4 x 6 patches; at 56 x 84 the 5 frames hold
// the processor's minimum, so no resize). The tokens: each group's image
// tokens, 2 around them and its timestamp (0 and 1 seconds for 4 frames
// at 2 a second; 0, 2, 4 for 5 at 1; 0 and 4 at 0.5): one token each.
func TestGLM4VVideosSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		config    string
		params    int64
		videos    core.Videos
		precision string
		want      int64 // saved bytes the videos add
		tokens    int64 // tokens they add to a sample
	}{
		{"glm4v-tiny.json", 203_808, core.Videos{Count: 1, Frames: 4, Height: 112, Width: 168, FPS: 2}, "fp32", 2_697_728, 54},
		{"glm4v-tiny.json", 203_808, core.Videos{Count: 1, Frames: 5, Height: 56, Width: 84, FPS: 1}, "fp32", 1_011_728, 27},
		{"glm4v-tiny.json", 203_808, core.Videos{Count: 2, Frames: 4, Height: 56, Width: 84, FPS: 0.5}, "fp32", 1_348_928, 36},
		{"glm4v-tiny.json", 203_808, core.Videos{Count: 1, Frames: 4, Height: 112, Width: 168, FPS: 2}, "bf16", 1_467_712, 54},
		{"glm4v-moe-tiny.json", 209_952, core.Videos{Count: 1, Frames: 4, Height: 112, Width: 168, FPS: 2}, "fp32", 2_697_728, 54},
	} {
		p := visionPlan(t, tc.config, hf.Options{Attn: "sdpa"}, tc.params, tc.precision)
		p.Seq = 128
		p.Videos = tc.videos
		with := evalPlan(t, p).SavedActivations
		p.Videos = core.Videos{}
		without := evalPlan(t, p).SavedActivations
		if got := with - without; got != tc.want {
			t.Errorf("%v %s: the videos add %d saved bytes, transformers %d (%+d)", tc.videos, tc.precision, got, tc.want, got-tc.want)
		}
		p.Videos, p.Seq = tc.videos, tc.tokens
		if _, err := Evaluate(p, core.Options{}); err != nil {
			t.Errorf("%v: seq=%d (the tokens the videos add) refused: %v", tc.videos, tc.tokens, err)
		}
		p.Seq = tc.tokens - 1
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "video tokens a sample") {
			t.Errorf("%v: seq=%d, one less than the videos' tokens: %v, want the seq error", tc.videos, tc.tokens-1, err)
		}
	}
}
