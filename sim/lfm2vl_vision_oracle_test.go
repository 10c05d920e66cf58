package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// lfm2VLTinyProcessor is the image processor of the tiny LFM2-VL models
// (patches of 4, tiles of 32 pixels: 64 patches, 16 image tokens a tile;
// 4 to 16 tokens an image; 2 to 4 tiles), as tools/oracle/lfm2vl.py reads
// it with proc=FILE.json; lfm2VLProcessor adds options to it.
const lfm2VLTinyProcessor = `"encoder_patch_size": 4, "tile_size": 32, "min_image_tokens": 4, "max_image_tokens": 16`

func lfm2VLProcessor(more string) []byte {
	return []byte(`{` + lfm2VLTinyProcessor + more + `}`)
}

// What the images add to the storages autograd saves in a tiny LFM2-VL
// (sim/testdata/hf/lfm2_vl-tiny.json: a SigLIP2 tower of 2 layers 32 wide,
// 2 heads, patches of 4, a 4 x 4 position grid; downsample_factor 2, the
// projector's LayerNorm, linear_1 to 48; a 3-layer LFM2 text model 64
// wide) and one without the projector's LayerNorm, a 8 x 8 grid and an
// untied head (lfm2_vl-nonorm-tiny.json), the step with the images minus
// the same step with text tokens in their place, as tools/oracle/lfm2vl.py
// measures it (transformers 5.25.0, torch 2.15.0, on the CPU; parameters
// and buffers excluded), the processor's options in a JSON file
// (proc-tiny.json: lfm2VLTinyProcessor with "min_tiles": 2, "max_tiles": 4):
//
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 1 50 70 128 [bf16] [ckpt] [eager] proc=proc-tiny.json
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 1 64 64 128 [ckpt] proc=proc-tiny.json
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 2 100 30 256 proc=proc-tiny.json
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 1 20 20 64 [bf16] proc=proc-tiny.json
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 2 200 90 256 eager proc=proc-tiny.json
//
// 50 x 70 pixels are too large for one image of at most 16 tokens: 2 x 2
// tiles of 64 patches and a 24 x 32 pixel thumbnail (48 patches), every
// one padded to 64 patches; 64 x 64 are 2 x 2 tiles and a 32 x 32
// thumbnail (no padding: no mask); 100 x 30, 3 x 1 tiles and a thumbnail
// of 56 patches; 20 x 20 one image of 16 patches; 200 x 90, 2 x 1 tiles
// and a thumbnail of 40. The figures hold the patches patch_embedding
// saves (a copy in the weights' dtype), the fp32 bilinear weights of the
// resized position grid the matmul saves, per layer what layer_norm1,
// SDPA (with padding the additive bias it converts the bool mask into, in
// the activations' dtype) or eager attention's scores, layer_norm2, fc1,
// the tanh GELU and fc2 keep, post_layernorm's input and statistics, the
// gather's int64 index, the pixel-unshuffled copy and what layer_norm,
// linear_1, GELU and linear_2 keep, the boolean index's mask and the
// placeholder mask. With every layer checkpointed each layer keeps its
// input, and the bool mask its argument.
func TestLFM2VLImagesSaveAsTransformers(t *testing.T) {
	tiny := hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4`)}
	eager := tiny
	eager.Attn = "eager"
	// lfm2vl.py on the meta device: 238,576 parameters, vision_tower
	// 19,232 and multi_modal_projector 9,584 of them, lm_head tied
	checkImagesSaveCases(t, "lfm2_vl-tiny.json", tiny, 238_576, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 1_403_728},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", false, 716_048},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", true, 343_888},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", true, 193_808},
		{core.Images{Count: 1, Height: 64, Width: 64}, 128, "fp32", false, 1_239_888},
		{core.Images{Count: 1, Height: 64, Width: 64}, 128, "fp32", true, 323_408},
		{core.Images{Count: 2, Height: 100, Width: 30}, 256, "fp32", false, 2_246_016},
		{core.Images{Count: 1, Height: 20, Width: 20}, 64, "fp32", false, 280_784},
		{core.Images{Count: 1, Height: 20, Width: 20}, 64, "bf16", false, 143_248},
	})
	checkImagesSaveCases(t, "lfm2_vl-tiny.json", eager, 238_576, []imagesSaveCase{
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", false, 1_562_448},
		{core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", false, 1_120_528},
		{core.Images{Count: 2, Height: 200, Width: 90}, 256, "fp32", false, 1_875_040},
	})
}

// The same under other processor options, on lfm2_vl-nonorm-tiny.json
// (256,240 parameters on the meta device, vision_tower 20,768 and
// multi_modal_projector 9,328; lm_head untied); transformers 5.25.0,
// torch 2.15.0, CPU:
//
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-nonorm-tiny.json 1 50 70 128 [bf16] proc=proc-nothumb.json
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-nonorm-tiny.json 2 50 70 128 [eager] proc=proc-nosplit.json
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-nonorm-tiny.json 1 90 200 128 [bf16 eager] proc=proc-big.json
//
// proc-nothumb.json is proc-tiny.json with "use_thumbnail": false: 50 x
// 70 are the 2 x 2 tiles alone; proc-nosplit.json lfm2VLTinyProcessor
// with "do_image_splitting": false: one 24 x 32 image of 48 patches,
// padded to 64; proc-big.json a processor_config.json whose
// image_processor holds lfm2VLTinyProcessor's patch and tile with 8 to 24
// tokens an image and 2 to 6 tiles, use_image_special_tokens false beside
// it: images padded to 96 patches, 90 x 200 cut into 1 x 2 tiles and a
// thumbnail of 84 patches.
func TestLFM2VLProcessorImagesSaveAsTransformers(t *testing.T) {
	im := core.Images{Count: 1, Height: 50, Width: 70}
	noThumb := hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4, "use_thumbnail": false`)}
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", noThumb, 256_240, []imagesSaveCase{
		{im, 128, "fp32", false, 1_007_808},
		{im, 128, "bf16", false, 539_840},
	})
	noSplit := hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor(`, "do_image_splitting": false`)}
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", noSplit, 256_240, []imagesSaveCase{{core.Images{Count: 2, Height: 50, Width: 70}, 128, "fp32", false, 569_504}})
	noSplit.Attn = "eager"
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", noSplit, 256_240, []imagesSaveCase{{core.Images{Count: 2, Height: 50, Width: 70}, 128, "fp32", false, 632_992}})
	big := hf.Options{Attn: "sdpa", Processor: []byte(`{"image_processor": {"encoder_patch_size": 4, "tile_size": 32, "min_image_tokens": 8, "max_image_tokens": 24, "min_tiles": 2, "max_tiles": 6}, "use_image_special_tokens": false}`)}
	wide := core.Images{Count: 1, Height: 90, Width: 200}
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", big, 256_240, []imagesSaveCase{{wide, 128, "fp32", false, 1_354_952}})
	big.Attn = "eager"
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", big, 256_240, []imagesSaveCase{{wide, 128, "bf16", false, 1_266_248}})
}

// The same under transformers 5.23.0 (hf.Options.Transformers), whose
// get_image_features runs the projector on each image apart over its real
// patches and whose resize_positional_embeddings interpolates the grid to
// each image (F.interpolate: nothing saved), as tools/oracle/lfm2vl.py
// measures it with the 5.23.0 wheel on the path (pip install --no-deps
// --target DIR transformers==5.23.0; the image layout still read from
// 5.25.0's image_processing_lfm2_vl.py, LAYOUT_TRANSFORMERS=its package:
// 5.23.0's resize_and_split inlines the same _get_split_layout; torch
// 2.15.0, CPU), L5 standing for that setting:
//
//	PYTHONPATH=DIR L5 python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 1 50 70 128 [bf16] [ckpt] [eager] proc=proc-tiny.json
//	PYTHONPATH=DIR L5 python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json 2 100 30 256 proc=proc-tiny.json
//	PYTHONPATH=DIR L5 python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-nonorm-tiny.json 1 50 70 128 proc=proc-nothumb.json
//	PYTHONPATH=DIR L5 python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-nonorm-tiny.json 2 50 70 128 proc=proc-nosplit.json
//
// Against 5.25.0's figures: no fp32 bilinear weights, no gather index, no
// boolean index's mask, and the projector's saves over each image's real
// tokens only (1,374,944 bytes against 1,403,728 for the 50 x 70 image).
func TestLFM2VLBefore524ImagesSaveAsTransformers(t *testing.T) {
	tiny := hf.Options{Attn: "sdpa", Transformers: "5.23.0", Processor: lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4`)}
	eager := tiny
	eager.Attn = "eager"
	im := core.Images{Count: 1, Height: 50, Width: 70}
	checkImagesSaveCases(t, "lfm2_vl-tiny.json", tiny, 238_576, []imagesSaveCase{
		{im, 128, "fp32", false, 1_374_944},
		{im, 128, "bf16", false, 690_096},
		{im, 128, "fp32", true, 315_104},
		{im, 128, "bf16", true, 167_856},
		{core.Images{Count: 2, Height: 100, Width: 30}, 256, "fp32", false, 2_203_360},
	})
	checkImagesSaveCases(t, "lfm2_vl-tiny.json", eager, 238_576, []imagesSaveCase{{im, 128, "fp32", false, 1_533_664}})
	noThumb := hf.Options{Attn: "sdpa", Transformers: "5.23.0", Processor: lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4, "use_thumbnail": false`)}
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", noThumb, 256_240, []imagesSaveCase{{im, 128, "fp32", false, 940_160}})
	noSplit := hf.Options{Attn: "sdpa", Transformers: "5.23.0", Processor: lfm2VLProcessor(`, "do_image_splitting": false`)}
	checkImagesSaveCases(t, "lfm2_vl-nonorm-tiny.json", noSplit, 256_240, []imagesSaveCase{{core.Images{Count: 2, Height: 50, Width: 70}, 128, "fp32", false, 528_512}})
}
