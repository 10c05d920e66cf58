package core

import (
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Transformer Engine's Float8BlockScaling recipe (train(float8=
// "te-blockwise"), Megatron's --fp8-recipe blockwise: DeepSeek-V3's
// granularity). Facts from NVIDIA/TransformerEngine v2.4,
// transformer_engine/pytorch:
//
//   - common/recipe/__init__.py Float8BlockScaling: activations and
//     gradients in 1x128 blocks (x_block_scaling_dim = grad_block_scaling_dim
//     = 1), weights in 128x128 blocks (w_block_scaling_dim = 2); fp8.py
//     Float8BlockScalingRecipeState holds no state tensors.
//   - tensor/float8_blockwise_tensor.py Float8BlockQuantizer: rowwise data
//     rows x cols (one byte each) and, with columnwise usage, a transposed
//     copy (get_columnwise_shape); one fp32 scale-inverse per block
//     (get_scale_shape): 1D rowwise [ceil(cols/128), round_up(rows, 4)],
//     columnwise [ceil(rows/128), round_up(cols, 4)]; 2D rowwise
//     [ceil(rows/128), round_up(ceil(cols/128), 4)], columnwise
//     [ceil(cols/128), round_up(ceil(rows/128), 4)].
//   - fp8.py check_fp8_block_scaling_support: compute capability 9.x
//     (Hopper) with CUDA 12.9; not Blackwell in this release.
//   - module/linear.py: with sequence parallelism the input is gathered in
//     high precision (force_hp_input_gather; distributed.py
//     _all_gather_fp8_blockwise: "Doing BF16 gather for now") and
//     quantized after the gather; the local bf16 input is what is saved,
//     and the backward gathers it again in bf16 and quantizes it
//     columnwise. Without the gather it is as the other recipes: the
//     input quantized both ways, the columnwise copy saved.

// blockwise reports whether the recipe is Float8BlockScaling.
func (f Float8) blockwise() bool { return f.Scaling == "te-blockwise" }

// Float8BlockScaling's block edge.
const blockwiseLen = 128

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// blockwiseScales1D is the fp32 scale bytes of a rows x cols tensor in 1x128
// blocks along its rows (rowwise usage; the columnwise scales of rows x
// cols are blockwiseScales1D(cols, rows)).
func blockwiseScales1D(rows, cols int64) int64 {
	return 4 * ceilDiv(cols, blockwiseLen) * roundUp(rows, 4)
}

// blockwiseScales2D is the fp32 scale bytes of a rows x cols tensor in
// 128x128 blocks (rowwise usage; columnwise: blockwiseScales2D(cols, rows)).
func blockwiseScales2D(rows, cols int64) int64 {
	return 4 * ceilDiv(rows, blockwiseLen) * roundUp(ceilDiv(cols, blockwiseLen), 4)
}

// blockwiseWeightScales registers the 128x128 block scales of a weight
// workspace [out, in] (rowwise) or of its transpose.
func (b *Builder) blockwiseWeightScales(name string, in, out int64, transposed bool) {
	if !b.f8.blockwise() {
		return
	}
	n, why := blockwiseScales2D(out, in), "fp32 scales of the fp8 weight, one per 128x128 block (padded)"
	if transposed {
		n, why = blockwiseScales2D(in, out), "fp32 scales of the transposed fp8 weight, one per 128x128 block (padded)"
	}
	b.Buffer(name, []int64{n / 4}, units.FP32, why)
}

// tpGatherBlockwise is the sequence-parallel input of a blockwise TE
// column-parallel linear: the local input gathered in bf16, quantized
// rowwise after the gather (the gathered bf16 tensor freed then); the
// backward gathers the local input again in bf16.
func (b *Builder) tpGatherBlockwise(x Value) Value {
	xl := b.Cast(x, b.Prec.Compute, "autocast copy of the TE linear's input (saved for the wgrad GEMM: blockwise scaling gathers in high precision)")
	s := append([]int64(nil), b.Shape(xl)...)
	s[len(s)-2] *= b.Par.Tp
	i := b.AddOp("all_gather", "sp_all_gather", []Value{xl})
	g := b.Out(i, "gathered", s, b.Prec.Compute, "sequence-parallel all-gather of the input in bf16 (force_hp_input_gather; freed once quantized)")
	b.Val(g).Grad = false
	b.Op(i).NoGradB = true
	n := b.Val(g).Bytes
	b.RecordComm("all_gather", "tp", n, false)
	b.RecordCommBeside("all_gather", "tp", n, i, true) // the backward gathers the saved local input again, beside the dgrad GEMMs
	b.RecordCommBeside("reduce_scatter", "tp", n, i, false)
	row, _ := b.teQuantize("input", g, false)
	return row
}

// blockwiseOnHopper is check_fp8_block_scaling_support: Hopper only.
func blockwiseOnHopper(name string) bool { return strings.HasPrefix(name, "H") }
