package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Transformer Engine's fp8 on Megatron-Core's grouped experts
// (TEGroupedMLP: one GroupedLinear per projection over this rank's
// experts). Facts from NVIDIA/TransformerEngine v2.4,
// transformer_engine/pytorch, and NVIDIA/Megatron-LM core_v0.13.0:
//
//   - module/grouped_linear.py _GroupedLinear.forward: the input is split
//     by expert and tex.fused_multi_quantize quantizes every split in one
//     kernel, rowwise and (when the weights train) columnwise, with each
//     expert's own quantizer; after the grouped GEMM the rowwise data is
//     dropped (update_usage(rowwise_usage=False, columnwise_usage=True))
//     and only the columnwise copies are saved: one fp8 copy of the
//     permuted rows, transposed per expert on Hopper (te_fp8.go). TE
//     allocates one tensor per expert; memsh holds them as one value (each
//     split is rows_e x in bytes, a multiple of 256 since rows_e is padded
//     to 16 and in is a multiple of 16: the caching allocator's 512-byte
//     rounding can add at most 256 B per expert, not modelled).
//   - the same function: each expert's weight is quantized into its own
//     workspace (get_weight_workspace, cache_name "weight{i}"), kept across
//     micro-batches as for a Linear, with the columnwise (transposed on
//     Hopper) copy when the input needs a gradient. The output is one bf16
//     tensor [sum(m_splits), out].
//   - _GroupedLinear.backward: grad_output split and quantized with both
//     usages by fused_multi_quantize (te_fp8.go's teBackward, over all rows).
//   - base.py init_fp8_metadata(num_gemms): delayed scaling holds forward
//     scale [3·num_gemms] and amax history [len, 3·num_gemms], backward
//     [2·num_gemms] and [len, 2·num_gemms]; current scaling a scale and an
//     amax per quantizer (5 per GEMM).
//   - base.py get_multi_stream_cublas_workspace: the grouped GEMMs run on
//     tex._num_cublas_streams = 4 streams (common/include/transformer_engine/
//     gemm.h num_streams), each with a workspace of
//     get_cublas_workspace_size_bytes() (32 MiB from compute capability 9.0,
//     4 MiB before), allocated once per process beside get_workspace's.
//   - utils.py assert_dim_for_fp8_exec: every split's rows a multiple of 8,
//     in and out multiples of 16.
//   - Megatron-LM megatron/core/transformer/moe/experts.py TEGroupedMLP
//     .forward: with config.fp8 the permuted rows and probs go through TE's
//     Fp8Padding (module/fp8_padding.py: each expert's rows rounded up to
//     16, 32 under MXFP8; a new tensor [sum(padded), in] written by
//     fused_multi_row_padding, nothing saved; no copy when every count is
//     already aligned) and the output through Fp8Unpadding (torch.cat of
//     the unpadded slices: a new tensor). core/fp8_utils.py
//     get_fp8_align_size gives the same 16 (32 for mxfp8).
//
// Modelled: te-delayed and te-tensorwise, the experts as moe(impl="grouped")
// under precision "megatron". MXFP8 and blockwise scaling (per-expert block
// scales over padded splits), fp8 primary weights for experts and the
// other MoE implementations are refused.

// teGroupedStreams is TE's number of cuBLAS streams for grouped GEMMs
// (common/include/transformer_engine/gemm.h num_streams, v2.4).
const teGroupedStreams = 4

// teFP8Align is Megatron's per-expert row alignment under fp8 for the
// per-tensor recipes (core/fp8_utils.py get_fp8_align_size).
const teFP8Align = 16

// TEGroupedFP8 reports whether the routed experts run through TE's fp8
// GroupedLinear; it refuses what is not modelled (grouped: the experts
// are moe(impl="grouped")).
func (b *Builder) TEGroupedFP8(grouped bool) bool {
	if !b.f8.TE() {
		return false
	}
	fail := func(msg, hint string) {
		panic(LowerError{&units.Error{Path: b.Name(""), Msg: msg, Hint: hint}})
	}
	switch {
	case !grouped || !b.MegatronKernels():
		fail("Transformer Engine's fp8 on routed experts is modelled for Megatron-Core's TEGroupedMLP only (moe impl=\"grouped\" under precision=\"megatron\")",
			`moe(..., impl="grouped") with train(precision="megatron"), or drop float8=`)
	case b.f8.mxfp8() || b.f8.blockwise():
		fail(fmt.Sprintf("Transformer Engine's %s recipe on grouped experts is not modelled (per-expert block scales over padded splits)", b.f8.Scaling),
			`float8="te-delayed" or "te-tensorwise" for a mixture of experts`)
	case b.f8.ParamGather:
		fail("fp8_param_gather=True with grouped experts is not modelled", "drop fp8_param_gather=, or use a dense model")
	}
	return true
}

// tePaddedRows is the rows after Megatron's fp8 padding of rows split
// over experts as evenly as memsh routes them (the first rows%experts
// experts one more each), each rounded up to teFP8Align.
func tePaddedRows(rows, experts int64) int64 {
	var n int64
	for e := range experts {
		r := rows / experts
		if e < rows%experts {
			r++
		}
		n += (r + teFP8Align - 1) / teFP8Align * teFP8Align
	}
	return n
}

// TEFP8Pad pads x's rows (split over experts) per expert to the fp8
// alignment (TE's Fp8Padding): a new tensor, or x when no expert needs
// padding.
func (b *Builder) TEFP8Pad(x Value, experts int64, what string) Value {
	rows := b.Shape(x)[0]
	padded := tePaddedRows(rows, experts)
	if padded == rows {
		return x
	}
	s := append([]int64{padded}, b.Shape(x)[1:]...)
	i := b.AddOp("copy", what+"_fp8_padding", []Value{x})
	y := b.Out(i, what+"_padded", s, b.Dtype(x), fmt.Sprintf("%s padded per expert to %d rows for fp8 (Fp8Padding)", what, teFP8Align))
	b.Op(i).Bytes = float64(b.Val(x).Bytes + b.Val(y).Bytes)
	return y
}

// TEFP8Unpad drops the padding rows of y (TE's Fp8Unpadding): a new
// tensor of rows rows, or y when nothing was padded.
func (b *Builder) TEFP8Unpad(y Value, rows int64) Value {
	if b.Shape(y)[0] == rows {
		return y
	}
	s := append([]int64{rows}, b.Shape(y)[1:]...)
	i := b.AddOp("copy", "fp8_unpadding", []Value{y})
	out := b.Out(i, "unpadded", s, b.Dtype(y), "expert outputs without the fp8 padding rows (Fp8Unpadding)")
	b.Op(i).Bytes = float64(b.Val(y).Bytes + b.Val(out).Bytes)
	return out
}

// TEGroupedLinear lowers one projection of experts local experts as TE's
// fp8 GroupedLinear: x [rows, in] (padded) times the 3-D weight w
// [experts, out, in] into a bf16 [rows, out]. Projections reading the
// same input (gate and up, Megatron's fused fc1) share its fp8 copies;
// stateful names the projection that registers the module's scaling
// state (fc1's is registered once for gate and up).
func (b *Builder) TEGroupedLinear(name string, role Role, x Value, w int32, experts, in, out int64, stateful bool) Value {
	defer b.Scope(name)()
	hp := b.Prec.Compute
	trains := b.Trainable(w)
	xgrad := b.Cast(x, hp, "autocast copy of the grouped linear's input")
	q, ok := b.teInput[xgrad]
	if !ok {
		q[0], q[1] = b.teQuantize("input", xgrad, trains)
		if b.teInput == nil {
			b.teInput = map[Value][2]Value{}
		}
		b.teInput[xgrad] = q
	}
	ins := []Value{q[0], xgrad}
	if q[1] != q[0] {
		ins = append(ins, q[1])
	}
	b.Buffer("weight_fp8", []int64{experts, out, in}, units.FP8, "Transformer Engine's fp8 weight workspaces, one per expert (GroupedLinear's weight{i} in module._fp8_workspaces, kept across micro-batches and steps)")
	dgrad := b.Grad(xgrad)
	if b.f8.transposes && dgrad {
		b.Buffer("weight_fp8_t", []int64{experts, in, out}, units.FP8, "transposed fp8 weights for the dgrad grouped GEMM, one per expert (columnwise usage, kept with the workspaces)")
	}
	if stateful {
		b.teScalingState(experts)
	}
	rows := Rows(b.Shape(xgrad))
	if in%16 != 0 || out%16 != 0 {
		panic(LowerError{&units.Error{Path: b.Name(""), Msg: fmt.Sprintf("a Transformer Engine fp8 grouped GEMM needs both dimensions divisible by 16 (assert_dim_for_fp8_exec), got %d -> %d", in, out),
			Hint: "drop float8=, or pick expert widths that are multiples of 16"}})
	}
	i := b.AddOp("grouped_matmul", "", ins, w)
	y := b.Out(i, "out", []int64{rows, out}, hp, "output of Transformer Engine fp8 grouped linear "+b.Name("")+" (bf16)")
	if trains {
		b.Save(i, q[1])
	}
	op := b.Op(i)
	op.Flops = 2 * float64(rows) * float64(in) * float64(out)
	op.Bytes = float64(rows*in+experts*in*out) + float64(hp.Bytes(rows*out)) // fp8 operands, bf16 output
	if dgrad || trains {
		op.WorkB, op.BwdStream, op.BwdStreamK = b.teBackward(rows, in, out, false, hp)
	}
	return y
}

// teGroupedSeen reports whether a TE grouped linear was lowered: in fp8
// (its per-expert workspaces registered as one [experts, out, in]
// buffer) or in bf16, Megatron-Core's TEGroupedMLP's grouped GEMM
// (OpInfo.TEGemm on a grouped_matmul). GroupedLinear's forward and
// backward call general_grouped_gemm in any precision, which takes
// get_cublas_workspace(device, False, True): one workspace per cuBLAS
// stream, lru_cache'd for the process (transformer_engine/pytorch/
// module/grouped_linear.py l.875 and l.1382, cpp_extensions/gemm.py
// l.48-65 at TransformerEngine d0067d0).
func (b *Builder) teGroupedSeen() bool {
	for _, bf := range b.P.Buffers {
		if len(bf.Shape) == 3 && len(bf.Name) > 11 && bf.Name[len(bf.Name)-11:] == ".weight_fp8" {
			return true
		}
	}
	for i := range b.P.Ops {
		if op := &b.P.Ops[i]; op.TEGemm && op.Kind == "grouped_matmul" {
			return true
		}
	}
	return false
}
