package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in tiny Qwen3-VL,
// Qwen3-VL-MoE and Qwen3.5 models (sim/testdata/hf/qwen3-vl-tiny.json: a
// 4-block vision tower 32 wide, patches of 16 pixels, an 8 x 8 pos_embed
// grid, deepstack after blocks 0 and 2; a 3-layer Qwen3 decoder 64 wide;
// qwen3-vl-moe-tiny.json: the same with Qwen3-VL-MoE's decoder, 4 experts;
// qwen3.5-vl-tiny.json: the same tower without deepstack before a 4-layer
// Qwen3.5 text model), trained in fp32 with sdpa on 64 tokens: the step
// with the images minus the same step with text tokens in their place, as
// tools/oracle/qwen3vl.py measures it (transformers 5.17.0, torch 2.15.0,
// on the CPU):
//
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-tiny.json 2 96 128 64
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-tiny.json 1 160 160 64
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-tiny.json 3 64 96 64
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-moe-tiny.json 2 96 128 64
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3.5-vl-tiny.json 2 96 128 64
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-tiny.json 2 96 128 64 bf16
//
// 96 x 128 pixels are 6 x 8 patches (12 image tokens), 160 x 160 are
// 10 x 10, 64 x 96 are 4 x 6. The figures are, in fp32: the pixel patches
// Conv3d saves (1,536 values a patch), pos_embed's int64 taps and fp32
// weights (4 a patch), the rotary cos and sin tables, per block its two
// LayerNorms' inputs, means and rstds and outputs, q and k after the rope,
// the qkv output (v is a view of it), each image's SDPA output and
// logsumexp, their concatenation, linear_fc1's output and GELU's; per
// deepstack merger (and the merger) its LayerNorm's statistics and output,
// linear_fc1's and GELU's outputs (the merger also its input, the last
// block's output, which no block saves); the placeholder mask. Deepstack's
// adds in the text model save only that mask, already counted: the
// Qwen3.5 figure is the Qwen3-VL one less two deepstack mergers (2 x
// 37,056 bytes). In bf16 (the model cast to bf16 as a whole, memsh's
// precision="bf16") the pixel patches stay fp32 and patch_embed saves its
// bf16 copy; the rotary tables and pos_embed's weights stay fp32.
func TestQwen3VLImagesSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		config    string
		params    int64 // the same script, on the meta device
		im        core.Images
		want      int64
		precision string
	}{
		{"qwen3-vl-tiny.json", 290_624, core.Images{Count: 2, Height: 96, Width: 128}, 1_477_312, ""},
		{"qwen3-vl-tiny.json", 290_624, core.Images{Count: 1, Height: 160, Width: 160}, 1_538_864, ""},
		{"qwen3-vl-tiny.json", 290_624, core.Images{Count: 3, Height: 64, Width: 96}, 1_108_000, ""},
		{"qwen3-vl-moe-tiny.json", 291_136, core.Images{Count: 2, Height: 96, Width: 128}, 1_477_312, ""},
		{"qwen3.5-vl-tiny.json", 297_032, core.Images{Count: 2, Height: 96, Width: 128}, 1_403_200, ""},
		{"qwen3-vl-tiny.json", 290_624, core.Images{Count: 2, Height: 96, Width: 128}, 748_672, "bf16"},
	} {
		if tc.precision == "" {
			tc.precision = "fp32"
		}
		p := visionPlan(t, tc.config, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, tc.params, tc.precision)
		checkImagesSave(t, tc.config+" "+tc.precision, p, tc.im, tc.want)
	}
}
