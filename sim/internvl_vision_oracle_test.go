package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny InternVL
// (sim/testdata/hf/internvl-tiny.json: InternViT of 2 layers 32 wide, 4
// heads, a GELU MLP of 64, attention biases, tiles of 56 pixels in
// patches of 14, downsample_ratio 0.5: 4 tokens a tile; a 2-layer Qwen2
// text model 64 wide), the step with the images minus the same step with
// text tokens in their place, as tools/oracle/internvl.py measures it
// (transformers 5.25.0, torch 2.15.0, on the CPU; parameters and buffers
// excluded):
//
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 1 56 56 32
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 1 100 300 64
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 3 56 56 64
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 1 56 56 32 bf16
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64 bf16
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64 ckpt
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64 bf16 ckpt
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 1 56 56 32 eager
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64 eager
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64 bf16 eager
//
// 56 x 56 pixels are one tile; 56 x 112 are 2 x 1 tiles and a thumbnail
// (3); 100 x 300 are 6 x 2 tiles and a thumbnail (13: the aspect ratio 3
// ties 3 x 1 and 6 x 2, and the image's area is over half the larger
// grid's, so get_optimal_tiled_canvas takes it). The figures hold the
// fp32 tiles the convolution saves (a bf16 copy in bf16); per layer
// layernorm_before's input and statistics, q, k and v, SDPA's output and
// logsumexp, projection_layer's input, its output (lambda_1 keeps it),
// layernorm_after's, fc1's input, the GELU's, fc2's input, fc2's output
// (lambda_2 keeps it); the projector's layer_norm input (the second
// pixel_shuffle copy) and statistics, linear_1's input, the GELU's,
// linear_2's; the placeholder mask. Eager attention keeps per layer the
// score matrix its softmax keeps and the probabilities the P.V matmul
// reads. With every layer checkpointed (InternVLVisionLayer is a
// GradientCheckpointingLayer; use_reentrant=False) each layer keeps its
// input alone.
func TestInternVLVisionSavesAsTransformers(t *testing.T) {
	// internvl.py on the meta device: 254,688 parameters, the vision tower
	// 36,640 and the projector 12,672 of them
	checkImagesSaveCases(t, "internvl-tiny.json", hf.Options{Attn: "sdpa"}, 254_688, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", false, 105_856},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", false, 635_008},
		{core.Images{Count: 1, Height: 100, Width: 300}, 64, "fp32", false, 1_375_776},
		{core.Images{Count: 3, Height: 56, Width: 56}, 64, "fp32", false, 317_536},
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "bf16", false, 53_216},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "bf16", false, 319_168},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", true, 289_024},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "bf16", true, 144_544},
	})
	checkImagesSaveCases(t, "internvl-tiny.json", hf.Options{Attn: "eager"}, 254_688, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", false, 114_560},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", false, 687_232},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "bf16", false, 343_648},
	})
}

// The same with InternViT-6B's layer shape (sim/testdata/hf/internvl-rms-tiny.json:
// norm_type rms_norm, no attention biases, use_mean_pooling false, so the
// tower ends in a LayerNorm), two 56 x 112 images at 64 tokens:
//
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-rms-tiny.json 2 56 112 64 [bf16]
//
// InternVLVisionRMSNorm is Llama's RMSNorm (fp32 statistics, the weight
// times the rows cast back), and keeps what it keeps; the final layernorm
// keeps its input and statistics.
func TestInternVLRMSNormSavesAsTransformers(t *testing.T) {
	checkImagesSaveCases(t, "internvl-rms-tiny.json", hf.Options{Attn: "sdpa"}, 254_432, []imagesSaveCase{
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", false, 699_472},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "bf16", false, 378_328},
	})
}

// The same with InternViT-6B's q_norm and k_norm (sim/testdata/hf/
// internvl-qknorm-tiny.json: internvl-rms-tiny.json with use_qk_norm):
//
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-qknorm-tiny.json 2 56 112 64 [bf16]
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-qknorm-tiny.json 2 56 112 64 bf16 ckpt
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-qknorm-tiny.json 2 56 112 64 eager
//
// InternVLVisionRMSNorm over q's and k's whole width (all heads at once)
// keeps per layer and per norm what Llama's RMSNorm keeps: the fp32 copy
// of its input, the rsqrt, and the normed rows cast back (the weight's
// gradient reads them); 2 x 32 more parameters a layer.
func TestInternVLQKNormSavesAsTransformers(t *testing.T) {
	checkImagesSaveCases(t, "internvl-qknorm-tiny.json", hf.Options{Attn: "sdpa"}, 254_560, []imagesSaveCase{
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", false, 805_552},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "bf16", false, 458_296},
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "bf16", true, 151_480},
	})
	checkImagesSaveCases(t, "internvl-qknorm-tiny.json", hf.Options{Attn: "eager"}, 254_560, []imagesSaveCase{
		{core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", false, 857_776},
	})
}
