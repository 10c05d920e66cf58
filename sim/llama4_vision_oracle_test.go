package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny Llama 4
// (sim/testdata/hf/llama4-vision-tiny.json: a 2-layer vision model 32
// wide, 4 heads, tiles of 56 pixels in patches of 14 (16 patches and the
// class token), pixel shuffle 0.5 (4 image tokens a tile), adapter and
// projector 48 wide; llama4-tiny.json's 4-layer text model 64 wide), the
// step with the images minus the same step with text tokens in their
// place, as tools/oracle/llama4vis.py measures it (transformers 5.17.0,
// torch 2.15.0, on the CPU; parameters and buffers excluded):
//
//	/work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json 1 56 56 64
//	/work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json 2 112 56 64
//	/work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json 1 150 200 96
//	/work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json 1 56 56 64 bf16
//	/work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json 2 112 56 64 bf16
//	/work/venv-t/bin/python llama4vis.py ../../sim/testdata/hf/llama4-vision-tiny.json 1 56 56 64 eager
//
// 56 x 56 pixels are one tile; 112 x 56 a 2 x 1 canvas and the global
// tile (3 tiles an image); 150 x 200 a 3 x 4 canvas and the global tile
// (13). One fp32 tile's 118,160 bytes, counted by hand from the list
// (llama4vis.py ... list): the unfolded patches' contiguous copy the
// patch linear saves (16 x 588 x 4 = 37,632); layernorm_pre's input, mean
// and rstd (2,312); per layer (35,360): input_layernorm's input, mean,
// rstd and output, q and k after the complex rotation, v, SDPA's output
// (o_proj's input) and logsumexp, the residual, post_attention_layernorm's
// statistics and output, fc1's and GELU's outputs; layernorm_post's
// (2,312); the pixel shuffle's copy fc1 reads and the adapter's four
// 4 x 48 outputs (5,120); the placeholder mask (64). In bf16 (the model
// built in bf16, from_config(dtype=torch.bfloat16), with bf16 pixels) all
// of it halves but the fp32 logsumexp and the bool mask; eager attention
// saves the [4, 17, 17] probabilities in place of the logsumexp.
func TestLlama4VisionSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		im        core.Images
		seq       int64
		attn      string
		precision string
		want      int64
	}{
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "sdpa", "fp32", 118_160},
		{core.Images{Count: 2, Height: 112, Width: 56}, 64, "sdpa", "fp32", 708_640},
		{core.Images{Count: 1, Height: 150, Width: 200}, 96, "sdpa", "fp32", 1_535_344},
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "sdpa", "bf16", 59_384},
		{core.Images{Count: 2, Height: 112, Width: 56}, 64, "sdpa", "bf16", 355_984},
		{core.Images{Count: 1, Height: 56, Width: 56}, 64, "eager", "fp32", 126_864},
	} {
		p := visionPlan(t, "llama4-vision-tiny.json", hf.Options{Attn: tc.attn, Transformers: "5.17.0"}, 252_096, tc.precision)
		p.Seq = tc.seq
		checkImagesSave(t, tc.attn+" "+tc.precision, p, tc.im, tc.want)
	}
}
