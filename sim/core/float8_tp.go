package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// torchao's float8 linears under DTensor tensor parallelism, as
// torchtitan 9dec370 applies them (parallelisms/parallelize_llama.py
// apply_tp with enable_float8: Float8ColwiseParallel,
// Float8RowwiseParallel and PrepareFloat8ModuleInput from
// torchao/float8/float8_tensor_parallel.py) with torchao eab345c (the
// benchmark's, December 2024), tensorwise dynamic scaling:
//
//   - PrepareFloat8ModuleInput (before attention and the MLP) casts the
//     sequence-sharded input to fp8 (hp_tensor_to_float8_dynamic on the
//     DTensor: the amax reduced over the tp group) and then redistributes
//     it to Replicate: the all-gather moves fp8, once for the linears that
//     read it ("so that if there are multiple float8 users of the input
//     activation, we perform fp8 allgather only once"). Without sequence
//     parallelism the cast is all it does.
//   - Float8ColwiseParallel's linears read that gathered fp8 tensor
//     (hp_tensor_to_float8_dynamic returns a Float8Tensor as it is); their
//     weight shard is cast to fp8 (or gathered in fp8 by FSDP2's float8
//     all-gather). Float8RowwiseParallel casts its local input (Shard(-1),
//     no redistribution) to fp8.
//   - Float8Linear.forward, tensorwise at eab345c, runs
//     manual_float8_matmul_with_args_in_float8, which saves input_fp8 and
//     weight_fp8_t: the gathered fp8 input (shared by the linears reading
//     it) or the local fp8 input, and the fp8 weight copy, one byte an
//     element each.
//   - NoopFwToFloat8BwDynamic on each output casts its gradient to fp8 in
//     the backward: a column-parallel linear's [rows, out/tp] gradient; a
//     row-parallel linear's sequence-sharded one, then all-gathered in fp8
//     by the reduce-scatter's backward.
//   - The backward's GEMMs take their operands through preprocess_addmm
//     (float8_ops.py): grad_input = mm(grad_fp8, weight_fp8_t.t()) copies
//     the weight (b.t().contiguous().t()); grad_weight = mm(grad_fp8.t(),
//     input_fp8) copies grad_output^T and the input (float8TPBackwardWork).
//     grad_input is the compute dtype; a column-parallel linear's is the
//     whole gathered sequence's, summed over the linears reading the
//     gathered input, until the reduce-scatter (aoGatherFP8).
//
// Rowwise scaling under tensor parallelism (torchao's later
// float8_tensor_parallel_rowwise_scales) and Megatron's tensor
// parallelism with torchao's linears are not modelled.

// aoTP reports whether torchao's float8 linears run under DTensor tensor
// parallelism.
func (b *Builder) aoTP() bool {
	return b.f8.On() && !b.f8.TE() && b.Par.Tpn() > 1 && b.Par.torchTP
}

// validateFloat8TP checks torchao's float8 under tensor parallelism.
func (p *Plan) validateFloat8TP() error {
	par := p.Parallel.Norm()
	fail := func(msg, hint string) error { return &units.Error{Path: "train", Msg: msg, Hint: hint} }
	if par.TPRuntime != "torch" {
		return fail("float8 with Megatron's tensor parallelism is not modelled: torchao's float8 linears shard as DTensor's (Float8ColwiseParallel, Float8RowwiseParallel)",
			`parallel(tp_runtime="torch"), or drop float8=`)
	}
	if p.Float8.Scaling != "tensorwise" {
		return fail("float8 rowwise scaling with tensor parallelism is not modelled (torchtitan's Float8ColwiseParallel casts with one scale per tensor)",
			`float8="tensorwise"`)
	}
	if p.Float8.AutoFilter {
		return fail("float8_auto_filter=True with tensor parallelism is not modelled (Float8ColwiseParallel needs every sharded linear converted)",
			"drop float8_auto_filter")
	}
	return nil
}

// aoInputs are the fp8 inputs of column-parallel float8 linears made so
// far: grad maps each to the compute-dtype tensor its linears send their
// input gradient to; fp8 maps an input gathered in the compute dtype
// outside PrepareFloat8ModuleInput to its one fp8 cast.
type aoInputs struct{ grad, fp8 map[Value]Value }

// aoGatherFP8 is PrepareFloat8ModuleInput: x (sequence-sharded with SP)
// cast to fp8 and all-gathered in fp8. The gathered fp8 value's gradient
// is the compute dtype's (ValueInfo.GradDType): the linears reading it sum
// their bf16 input gradients into one tensor of the whole sequence, which
// the all-gather's backward reduce-scatters into x's, as DTensor's
// redistribute does for a bf16 gather. Without a gather, the linears send
// their input gradient to x (aoInputs.grad).
func (b *Builder) aoGatherFP8(x Value) Value { return b.aoFP8Input(x, b.Par.sp) }

// aoFP8Input casts x to fp8 and, with gather, all-gathers the fp8 copy
// along the sequence.
func (b *Builder) aoFP8Input(x Value, gather bool) Value {
	xl := b.Cast(x, b.Prec.Compute, "autocast copy of the float8 linears' input")
	x8 := b.fp8Cast("input", xl, -1, b.Shape(xl), false)
	y := x8
	if gather {
		s := append([]int64(nil), b.Shape(x8)...)
		s[len(s)-2] *= b.Par.Tp
		// xl is read for the gradient: the all-gather's backward
		// reduce-scatters the gathered input's gradient into xl's.
		i := b.AddOp("all_gather", "sp_all_gather_fp8", []Value{x8, xl})
		y = b.Out(i, "gathered_fp8", s, units.FP8, "sequence-parallel all-gather of the fp8 input (PrepareFloat8ModuleInput; saved by the float8 linears reading it)")
		b.Val(y).GradDType = b.Prec.Compute // grad_input of _scaled_mm, summed over the linears reading it
		b.Op(i).Bytes = float64(b.Val(x8).Bytes + b.Val(y).Bytes)
		n := b.Val(y).Bytes
		b.noteSymmMem(b.Val(x8).Bytes) // async TP: the fp8 shard passes through the workspace
		b.RecordCommUB("all_gather", n, i, false)
		b.RecordCommBeside("reduce_scatter", "tp", b.Prec.Compute.Bytes(Numel(s)), i, false) // the input gradient
	}
	if b.aoInput.grad == nil {
		b.aoInput = aoInputs{grad: map[Value]Value{}, fp8: map[Value]Value{}}
	}
	b.aoInput.grad[y] = xl
	return y
}

// aoLinear lowers a Float8Linear under tensor parallelism: column-parallel
// (col) over x8, the fp8 input PrepareFloat8ModuleInput made, or
// row-parallel over x, this rank's slice; in and out are this rank's
// widths, wFull the unsharded weight's elements.
func (b *Builder) aoLinear(name string, role Role, x Value, in, out, wFull, biasFull int64, bias, col bool) Value {
	fullIn, fullOut := in, out
	if col {
		fullOut = wFull / in
	} else {
		fullIn = wFull / out
	}
	// Both refusals are the layout's (LayoutError): the model lowers at
	// tp=1, and the second at a tp that leaves every shard aligned.
	if fullIn%16 != 0 || fullOut%16 != 0 {
		panic(&LayoutError{&units.Error{Path: b.Name(name), Msg: fmt.Sprintf("torchtitan's Float8ColwiseParallel and Float8RowwiseParallel need a Float8Linear, and torchtitan leaves %s (%d -> %d) in high precision (dimensions not multiples of 16)", name, fullIn, fullOut),
			Hint: "drop float8=, or tp=1"}})
	}
	if in%16 != 0 || out%16 != 0 { // torch._scaled_mm on this rank's shard
		panic(&LayoutError{&units.Error{Path: b.Name(name), Msg: fmt.Sprintf("%s's shard on a tensor-parallel rank (%d -> %d of %d -> %d) is not a multiple of 16, which torch._scaled_mm refuses", name, in, out, fullIn, fullOut),
			Hint: "a tp that leaves every linear's shard a multiple of 16, or drop float8="}})
	}
	b.float8TokensAligned(name, x)
	defer b.Scope(name)()
	w := b.Param("weight", []int64{out, in}, role)
	b.ShardParam(w, wFull)
	hp := b.Prec.Compute
	var x8, xgrad Value
	if col {
		x8 = x
		if b.Dtype(x) != units.FP8 { // an input gathered outside PrepareFloat8ModuleInput: Float8ColwiseParallel casts it
			var ok bool
			if x8, ok = b.aoInput.fp8[x]; !ok {
				x8 = b.aoFP8Input(x, false)
				b.aoInput.fp8[x] = x8
			}
		}
		xgrad = b.aoInput.grad[x8]
	} else {
		xgrad = b.Cast(x, hp, "autocast copy of the float8 linear's input")
		x8 = b.fp8Cast("input", xgrad, -1, b.Shape(xgrad), false) // Float8RowwiseParallel._prepare_input_fn
	}
	ins := []Value{x8}
	if !b.Grad(x8) {
		ins = append(ins, xgrad) // the fp8 cast records no graph: the gradient goes to xgrad
	}
	w8 := NoValue
	if b.f8.AllGather {
		b.P.Params[w].GatherFP8 = true
	} else {
		w8 = b.fp8Cast("weight", NoValue, w, []int64{out, in}, false)
		ins = append(ins, w8)
	}
	i := b.AddOp("matmul", "", ins, w)
	y := b.Out(i, "out", WithLast(b.Shape(x8), out), hp, "output of float8 linear "+b.Name("")+" (torch._scaled_mm, tensor-parallel)")
	trains := b.Trainable(w)
	if trains || b.Grad(x8) || b.Grad(xgrad) {
		b.Save(i, x8, w8) // manual_float8_matmul_with_args_in_float8: input_fp8, weight_fp8_t
	}
	rows := Rows(b.Shape(x8))
	op := b.Op(i)
	op.ScaledMM = true
	op.Flops = 2 * float64(rows) * float64(in) * float64(out)
	op.Bytes += float64(rows*in+in*out) + float64(hp.Bytes(rows*out))
	if trains || b.Grad(x8) || b.Grad(xgrad) {
		gradCast := rows * out // the gradient NoopFwToFloat8BwDynamic casts
		if !col && b.Par.sp {
			gradCast /= b.Par.Tp
		}
		if col && !b.Par.sp && b.Grad(xgrad) {
			// ColwiseParallel without sequence parallelism: the input
			// gradient's all-reduce (Replicate from Partial)
			b.recordInputComm("all_reduce", xgrad, hp.Bytes(rows*in), i, false)
		}
		op.WorkB = float8TPBackwardWork(rows*out, gradCast, rows*in, out*in, b.graph)
		op.BwdStream, op.BwdStreamK = float8TPBackwardCasts(rows*out, gradCast, rows*in, out*in, hp, b.graph)
	}
	if bias {
		pb := b.Param("bias", []int64{out}, role)
		if biasFull > 0 {
			b.ShardParam(pb, biasFull)
		}
		j := b.AddOp("add", "bias", []Value{y}, pb)
		y = b.Out(j, "biased", b.Shape(y), hp, "float8 linear output plus its bias")
		b.Op(j).Flops = float64(Numel(b.Shape(y)))
	}
	return y
}

// float8TPBackwardWork is the most memory a tensor-parallel Float8Linear's
// backward (eab345c) holds at once besides the gradients, in bytes: g
// elements of grad_output (fp8, one byte), c of them cast here (all of a
// column-parallel linear's; a row-parallel one casts its sequence shard
// and all-gathers the fp8 result), x of the saved fp8 input, w of the
// weight. In order:
//
//	1 NoopFwToFloat8BwDynamic casts grad_output   eager peak 9·c (+ g gathered)
//	2 grad_input: the weight copied               g + w
//	3 grad_weight: grad_output^T and the input    2g + x
//	  copied
//
// An eager cast holds 9 bytes an element at its peak (the fp32 scaled and
// clamped tensors and the fp8 copy, float8BackwardWork); compiled, the
// cast is one fused kernel writing the fp8 tensor.
func float8TPBackwardWork(g, c, x, w int64, compiled bool) int64 {
	work := max(g+w, 2*g+x)
	if compiled {
		return work
	}
	cast := 9 * c
	if c < g {
		cast = max(cast, c+g)
	}
	return max(work, cast)
}

// float8TPBackwardCasts is the HBM traffic and kernels of that backward's
// cast and copies (the GEMMs are priced from the op's shape): the
// gradient's cast of c elements in dtype hp (float8CastTraffic), and the
// three layout copies (w, g and x, read and written).
func float8TPBackwardCasts(g, c, x, w int64, hp units.DType, compiled bool) (bytes float64, kernels int32) {
	bytes, kernels = float8CastTraffic(c, hp, compiled)
	return bytes + 2*float64(w+g+x), kernels + 3
}
