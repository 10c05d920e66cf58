package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Transformer Engine's MXFP8 recipe (train(float8="te-mxfp8"), Megatron's
// --fp8-recipe mxfp8: MXFP8BlockScaling). Facts from
// NVIDIA/TransformerEngine v2.4, transformer_engine/pytorch:
//
//   - tensor/mxfp8_tensor.py MXFP8Quantizer.make_empty: an MXFP8 tensor of
//     rows x cols (rows: every dimension but the last) holds rowwise data
//     (rows x cols, one byte each) with one e8m0 scale-inverse (one byte)
//     per 32 consecutive elements of a row, padded to
//     [round_up(rows, 128), round_up(cols/32, 4)]; with columnwise usage,
//     a second copy of the data in the same layout (not transposed) with
//     one scale per 32 elements of a column, padded to
//     [round_up(rows/32, 4), round_up(cols, 128)]. Both dimensions must be
//     multiples of 32 (MXFP8_BLOCK_SCALING_SIZE).
//   - tensor/_internal/mxfp8_tensor_base.py update_usage only drops a
//     usage: "columnwise scaled output is only produced by x2 scaling
//     kernels", so every tensor a GEMM reads both ways is quantized into
//     two copies in one kernel, on every GPU (no transpose, no sharing).
//   - module/linear.py: the input is quantized with both usages; the
//     rowwise copy is dropped after the fprop GEMM and the columnwise one
//     saved. With sequence parallelism the local input keeps both usages
//     (only Float8 quantizers drop columnwise before a gather), the
//     rowwise data is all-gathered, the local columnwise copy is saved and
//     the backward all-gathers it ("For MXFP8, columnwise only data can
//     be allgathered"). grad_output is quantized with both usages; the
//     weight workspace keeps both when the input needs a gradient.
//   - fp8.py MXFP8BlockScalingRecipeState: "MXFP8 quantization does not
//     require state": no scale or amax buffers. check_mxfp8_support:
//     compute capability 10.0 (Blackwell) or later.
//
// The scales are counted with the data they scale: an activation's bytes
// include its scales; a weight's scales are buffers of their own.

// mxfp8 reports whether the recipe is MXFP8.
func (f Float8) mxfp8() bool { return f.Scaling == "te-mxfp8" }

// MXFP8 block: 32 elements share one e8m0 scale.
const mxfp8Block = 32

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

// mxfp8RowScales is the bytes of the rowwise scale-inverses of an MXFP8
// tensor of rows x cols; mxfp8ColScales the columnwise ones.
func mxfp8RowScales(rows, cols int64) int64 {
	return roundUp(rows, 128) * roundUp(cols/mxfp8Block, 4)
}

func mxfp8ColScales(rows, cols int64) int64 {
	return roundUp(rows/mxfp8Block, 4) * roundUp(cols, 128)
}

// mxfp8Weight registers an MXFP8 weight workspace: rowwise data and
// scales, and the columnwise copy with its scales when the dgrad GEMM
// needs it.
func (b *Builder) mxfp8Weight(in, out int64, dgrad bool) {
	b.Buffer("weight_fp8", []int64{out, in}, units.FP8, "Transformer Engine's MXFP8 weight workspace, rowwise data (module._fp8_workspaces, kept across micro-batches and steps)")
	b.Buffer("weight_fp8_scale_inv", []int64{roundUp(out, 128), roundUp(in/mxfp8Block, 4)}, units.FP8, "its e8m0 scales, one per 32 elements of a row (padded)")
	if dgrad {
		b.Buffer("weight_fp8_colwise", []int64{out, in}, units.FP8, "MXFP8 columnwise copy of the weight for the dgrad GEMM (a second quantization, not a transpose)")
		b.Buffer("weight_fp8_colwise_scale_inv", []int64{roundUp(out/mxfp8Block, 4), roundUp(in, 128)}, units.FP8, "its e8m0 scales, one per 32 elements of a column (padded)")
	}
}

// checkMXFP8Dims stops lowering a linear whose quantized tensors MXFP8
// cannot block: every dimension a multiple of 32 (make_empty's assert).
//
// The refusal is the layout's (LayoutError: a rank's rows and shard
// follow the micro-batch, cp and tp), so search() rejects the layout.
func (b *Builder) checkMXFP8Dims(rows, local, in, out int64) {
	if !b.f8.mxfp8() || (rows%mxfp8Block == 0 && local%mxfp8Block == 0 && in%mxfp8Block == 0 && out%mxfp8Block == 0) {
		return
	}
	panic(&LayoutError{&units.Error{Path: b.Name(""), Msg: fmt.Sprintf("Transformer Engine's MXFP8 quantizes blocks of 32: rows (%d, %d on this rank) and both dimensions (%d -> %d) must be multiples of 32", rows, local, in, out),
		Hint: `float8="te-tensorwise", or a batch x sequence and layer widths that are multiples of 32`}})
}
