package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny Idefics3
// (sim/testdata/hf/idefics3-tiny.json: a SigLIP vision model of 2 layers
// 32 wide, 2 heads, tiles of 32 pixels in patches of 8, scale_factor 2:
// 4 tokens a tile; a 2-layer Llama text model 64 wide) and a tiny SmolVLM
// (smolvlm-tiny.json: tiles of 64 pixels, scale_factor 4), the step with
// the images minus the same step with text tokens in their place, as
// tools/oracle/idefics3.py measures it (transformers 5.25.0, torch
// 2.15.0, on the CPU; parameters and buffers excluded):
//
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json 1 50 70 128 [bf16] [ckpt] [eager]
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json 1 32 32 128
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json 2 100 30 256
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-odd-tiny.json 1 50 70 128 [bf16]
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/smolvlm-tiny.json 1 50 70 128 [bf16 ckpt] [eager]
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/smolvlm-tiny.json 2 64 64 256 [bf16]
//
// 50 x 70 pixels are resized to 92 x 128 (the longest edge to 4 x 32),
// then to 96 x 128: 3 x 4 tiles and the global image, 13 tiles of 32 x
// 32; 32 x 32 are 4 x 4 tiles and the global one (17); 100 x 30, 4 x 2
// and the global one (9). For SmolVLM's tiles of 64 pixels, 50 x 70 are
// resized to 182 x 256, then 192 x 256: 3 x 4 tiles and the global one;
// 64 x 64 are 4 x 4 and the global one (17 tiles, 107 tokens an image
// with its tags). The figures hold the tiles' pixels the convolution
// saves (a copy in the weights' dtype), the int64 position ids the
// position embedding's lookup saves (one a patch), per SigLIP layer what
// layer_norm1, SDPA (or eager attention's score matrix and
// probabilities), layer_norm2, fc1, the tanh GELU and fc2 keep,
// post_layernorm's input and statistics, the pixel-shuffled copy
// modality_projection saves, and the placeholder mask. With every layer
// checkpointed each SigLIP layer keeps its input alone.
func TestIdefics3ImagesSaveAsTransformers(t *testing.T) {
	// idefics3.py on the meta device: 144,480 parameters, vision_model
	// 23,840 and connector 8,192 of them
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "sdpa"}, 144_480, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 865_408},
		{core.Images{Count: 1, Height: 32, Width: 32}, 128, "fp32", false, 1_131_648},
		{core.Images{Count: 2, Height: 100, Width: 30}, 256, "fp32", false, 1_198_336},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", false, 435_264},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", true, 269_696},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", true, 135_744},
	})
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "eager"}, 144_480, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 915_328},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", false, 511_808},
	})
	// Tiles of 36 pixels in patches of 8 (idefics3-odd-tiny.json), as
	// SmolVLM-2.2B's 384 in patches of 14: the convolution reads 4 x 4
	// patches, the tiles' pixels the copy it saves hold all 36 x 36.
	checkImagesSaveCases(t, "idefics3-odd-tiny.json", hf.Options{Attn: "sdpa"}, 144_480, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 907_840},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", false, 456_480},
	})
	// 170,592 parameters, vision_model 25,376 and connector 32,768
	checkImagesSaveCases(t, "smolvlm-tiny.json", hf.Options{Attn: "sdpa"}, 170_592, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 3_461_248},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", true, 542_592},
		{core.Images{Count: 2, Height: 64, Width: 64}, 256, "fp32", false, 9_052_416},
		{core.Images{Count: 2, Height: 64, Width: 64}, 256, "bf16", false, 4_552_448},
	})
	checkImagesSaveCases(t, "smolvlm-tiny.json", hf.Options{Attn: "eager"}, 170_592, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 4_299_904},
	})
}

// The same under processor= options (hf.Options.Processor, a
// preprocessor_config.json), as tools/oracle/idefics3.py measures them
// with longest=N (size["longest_edge"]) and nosplit
// (do_image_splitting=False); transformers 5.25.0, torch 2.15.0, CPU:
//
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json 1 50 70 128 [bf16] [ckpt] [eager] longest=64|nosplit
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json 2 100 30 384 longest=200
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/smolvlm-tiny.json 1 50 70 128 [eager] longest=128
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/smolvlm-tiny.json 2 64 64 256 bf16 nosplit
//
// 50 x 70 pixels at a longest edge of 64 are 46 x 64, then 64 x 64: 2 x 2
// tiles and the global one (5 tiles, 33 tokens an image); unsplit, one
// tile of 32 x 32 (7 tokens with the tags); 100 x 30 at 200, 7 x 3 tiles
// and the global one (140 tokens an image); SmolVLM's tiles of 64 at 128,
// 2 x 2 and the global one.
func TestIdefics3ProcessorImagesSaveAsTransformers(t *testing.T) {
	longest := []byte(`{"size": {"longest_edge": 64}}`)
	noSplit := []byte(`{"do_image_splitting": false}`)
	im := core.Images{Count: 1, Height: 50, Width: 70}
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "sdpa", Processor: longest}, 144_480, []imagesSaveCase{
		{im, 128, "fp32", false, 332_928},
		{im, 128, "bf16", false, 167_488},
	})
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "eager", Processor: longest}, 144_480, []imagesSaveCase{
		{im, 128, "fp32", false, 352_128},
	})
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "sdpa", Processor: []byte(`{"size": {"longest_edge": 200}}`)}, 144_480, []imagesSaveCase{
		{core.Images{Count: 2, Height: 100, Width: 30}, 384, "fp32", false, 2_929_024},
	})
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "sdpa", Processor: noSplit}, 144_480, []imagesSaveCase{
		{im, 128, "fp32", false, 66_688},
		{im, 128, "bf16", true, 10_560},
	})
	checkImagesSaveCases(t, "idefics3-tiny.json", hf.Options{Attn: "eager", Processor: noSplit}, 144_480, []imagesSaveCase{
		{im, 128, "bf16", false, 39_488},
	})
	smolLongest := hf.Options{Attn: "sdpa", Processor: []byte(`{"size": {"longest_edge": 128}, "max_image_size": {"longest_edge": 64}}`)}
	checkImagesSaveCases(t, "smolvlm-tiny.json", smolLongest, 170_592, []imagesSaveCase{{im, 128, "fp32", false, 1_331_328}})
	smolLongest.Attn = "eager"
	checkImagesSaveCases(t, "smolvlm-tiny.json", smolLongest, 170_592, []imagesSaveCase{{im, 128, "fp32", false, 1_653_888}})
	checkImagesSaveCases(t, "smolvlm-tiny.json", hf.Options{Attn: "sdpa", Processor: noSplit}, 170_592, []imagesSaveCase{
		{core.Images{Count: 2, Height: 64, Width: 64}, 256, "bf16", false, 268_032},
	})
}
