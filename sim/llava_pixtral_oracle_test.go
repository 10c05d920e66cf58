package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny LLaVA with
// Pixtral's tower (sim/testdata/hf/llava-pixtral-tiny.json: mistral3-tiny.json's
// tower and text model under model_type llava, vision_feature_layer -1,
// vision_feature_select_strategy "full", LlavaMultiModalProjector with
// biases: no norm, no patch merger, every patch an image token), as
// tools/oracle/mistral3vl.py measures it (transformers 5.25.0, torch
// 2.15.0, on the CPU; parameters and buffers excluded; PixtralProcessor's
// spatial_merge_size 1, so sides are rounded to multiples of 14 pixels):
//
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/llava-pixtral-tiny.json --params
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/llava-pixtral-tiny.json COUNT HEIGHT WIDTH SEQ [bf16] [ckpt] [eager]
//
// 100 x 150 pixels are scaled to 74 x 112 and rounded up to 84 x 112.
//
// with the arguments of each case below. The figures hold what
// TestMistral3VisionSavesAsTransformers lists less the projector's norm
// and merger: linear_1's input is the tower's last hidden state, which the
// last layer's residual add made (no copy). With every layer checkpointed
// memsh counts the rotary cos and sin beside what autograd packs, as for
// Mistral 3 (the recompute's arguments, which no saved-tensor hook sees).
func TestLlavaPixtralSavesAsTransformers(t *testing.T) {
	// mistral3vl.py --params on the meta device: 250,848 parameters, the
	// vision tower 39,456 and the projector 6,272 of them (32 x 64 + 64 and
	// 64 x 64 + 64), lm_head untied
	checkImagesSaveCases(t, "llava-pixtral-tiny.json", hf.Options{Attn: "sdpa"}, 250_848, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "fp32", false, 128_640},
		{core.Images{Count: 2, Height: 84, Width: 112}, 128, "fp32", false, 802_304},
		{core.Images{Count: 1, Height: 100, Width: 150}, 96, "fp32", false, 391_968},
		{core.Images{Count: 3, Height: 56, Width: 84}, 128, "fp32", false, 594_848},
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "bf16", false, 69_888},
		{core.Images{Count: 2, Height: 84, Width: 112}, 128, "bf16", false, 434_432},
		{core.Images{Count: 2, Height: 84, Width: 112}, 128, "fp32", true, 373_760 + 2*96*8*4},
	})
	checkImagesSaveCases(t, "llava-pixtral-tiny.json", hf.Options{Attn: "eager"}, 250_848, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "fp32", false, 135_296},
		{core.Images{Count: 2, Height: 84, Width: 112}, 128, "fp32", false, 1_057_280},
		{core.Images{Count: 2, Height: 84, Width: 112}, 128, "bf16", false, 855_296},
	})
}
