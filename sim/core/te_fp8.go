package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// Transformer Engine's FP8 linears as Megatron-Core runs them
// (train(float8="te-delayed" | "te-tensorwise"); the block-scaled recipes
// in te_mxfp8.go and te_blockwise.go, fp8 primary weights in
// te_fp8_params.go). Facts from
// NVIDIA/TransformerEngine v2.4, transformer_engine/pytorch:
//
//   - module/linear.py _Linear.forward: the input is quantized with
//     rowwise usage (read by the fprop GEMM) and, when the weight trains,
//     columnwise usage (read by the wgrad GEMM); after the GEMM the
//     rowwise data is dropped (inputmat.update_usage(rowwise_usage=False,
//     columnwise_usage=True)) and only the columnwise copy is saved. With
//     sequence parallelism (parallel_mode="column") the local input is
//     quantized rowwise only ("All-gather is not supported with FP8
//     column-wise data"), all-gathered in fp8, and the local rowwise shard
//     is saved; the backward gathers it again in fp8 and makes the
//     columnwise copy of the gathered input.
//   - tensor/_internal/float8_tensor_base.py update_usage: on a GPU whose
//     fp8 GEMMs take only the TN layout (is_non_tn_fp8_gemm_supported:
//     compute capability below 10.0: Ada, Hopper), columnwise data is a
//     second, transposed fp8 copy (_create_transpose); on Blackwell the
//     one fp8 copy serves both usages.
//   - module/base.py get_weight_workspace: the weight is quantized into a
//     workspace kept in module._fp8_workspaces while is_first_microbatch is
//     not None, updated on the first micro-batch and reused by the others.
//     Megatron-Core's TE wrappers (megatron/core/extensions/
//     transformer_engine.py, core_v0.13.0: TELinear.forward) pass
//     is_first_microbatch unless --disable-parameter-transpose-cache, so
//     the workspace (rowwise, plus the transpose for dgrad on Hopper)
//     lives as long as the model: memsh registers it as a module buffer.
//   - _Linear.backward: grad_output is quantized with both usages (dgrad
//     reads rowwise, wgrad columnwise: a transpose on Hopper).
//   - fp8.py DelayedScalingRecipeState: per module, forward scale
//     [3·gemms] and amax_history [amax_history_len, 3·gemms] fp32
//     (input, weight, output), backward [2·gemms] (grad_output,
//     grad_input). Megatron's --fp8-amax-history-len defaults to 1.
//     Current scaling (Float8CurrentScalingQuantizer, float8_tensor.py)
//     holds a scale and an amax of one fp32 each per quantizer.
//   - module/base.py get_workspace: one cuBLAS workspace for all TE GEMMs,
//     32 MiB on compute capability 9.0 and later, 4 MiB before.
//
// Megatron-Core's transformer layer with the TE spec runs q/k/v (fused),
// the attention output projection, fc1 and fc2 through TE linears; the
// output layer is Megatron's own ColumnParallelLinear and stays bf16.
// TE's LayerNormLinear writes the norm's output in fp8 directly; memsh
// lowers the norm on its own, so its bf16 output exists until the cast
// (a transient, never saved).

// TEFloat8Recipes lists the Transformer Engine recipes float8= takes.
func TEFloat8Recipes() []string {
	return []string{"te-delayed", "te-tensorwise", "te-mxfp8", "te-blockwise"}
}

// TE reports whether the linears are Transformer Engine's.
func (f Float8) TE() bool { return strings.HasPrefix(f.Scaling, "te-") }

// teTransposes reports whether fp8 columnwise data is a transposed copy:
// GPUs whose fp8 GEMMs take only the TN layout (below compute capability
// 10.0). The catalog's Blackwell parts are named B...; GB... likewise.
func teTransposes(d hw.Device) bool {
	return !strings.HasPrefix(d.Name, "B") && !strings.HasPrefix(d.Name, "GB")
}

// forDevice fills in what lowering needs from the device: whether
// columnwise fp8 data is a transposed copy, and whether it is compute
// capability 9.0 or later (Hopper, Blackwell: TE's 32 MiB cuBLAS workspace).
func (f Float8) forDevice(d hw.Device) Float8 {
	f.transposes = f.TE() && teTransposes(d)
	f.cc9 = strings.HasPrefix(d.Name, "H") || !teTransposes(d)
	return f
}

// validateTEFloat8 checks a Transformer Engine recipe against the plan.
func (p *Plan) validateTEFloat8() error {
	f := p.Float8
	fail := func(msg, hint string) error { return &units.Error{Path: "train", Msg: msg, Hint: hint} }
	d := p.Device
	if f.AmaxHistory > 1 && f.Scaling != "te-delayed" || f.AmaxHistory < 0 || f.AmaxHistory > 1<<20 {
		return fail(fmt.Sprintf("fp8_amax_history=%d: an amax history is delayed scaling's, between 1 and 1,048,576", f.AmaxHistory), `float8="te-delayed", or drop fp8_amax_history=`)
	}
	switch f.Scaling {
	case "te-delayed", "te-tensorwise":
	case "te-mxfp8":
		if teTransposes(d) {
			return fail(fmt.Sprintf("Transformer Engine's MXFP8 recipe needs Blackwell (compute capability 10.0: block-scaled fp8 tensor cores); %s has none", d.Name),
				`float8="te-delayed" or "te-tensorwise" on Hopper, or gpu="B200"`)
		}
	case "te-blockwise":
		if !blockwiseOnHopper(d.Name) {
			return fail(fmt.Sprintf("Transformer Engine's Float8BlockScaling recipe runs on Hopper only (check_fp8_block_scaling_support: compute capability 9.x, CUDA 12.9); %s is not one", d.Name),
				`float8="te-mxfp8" (block scaling on Blackwell) or "te-tensorwise", or gpu="H100-80GB"`)
		}
	default:
		return fail(fmt.Sprintf("unknown float8 recipe %q (known: tensorwise, rowwise, %s)", f.Scaling, strings.Join(TEFloat8Recipes(), ", ")),
			`float8="te-delayed" for Megatron's default --fp8-recipe delayed`)
	}
	if d.FP8TFLOPS <= 0 {
		return fail(fmt.Sprintf("Transformer Engine's fp8 needs fp8 tensor cores (compute capability 8.9 or later: Ada, Hopper, Blackwell); %s has none", d.Name),
			`train on an H100 (gpu="H100-80GB") or drop float8=`)
	}
	if strings.HasPrefix(d.Name, "MI") {
		return fail(fmt.Sprintf("Transformer Engine's fp8 on %s (ROCm's TransformerEngine fork) is not modelled", d.Name), "drop float8=, or pick an NVIDIA GPU")
	}
	switch {
	case f.AllGather:
		return fail("fsdp_float8_all_gather=True is torchao's; Transformer Engine's linears keep their own fp8 weight workspaces",
			"drop fsdp_float8_all_gather=")
	case p.Parallel.FSDP:
		return fail("Transformer Engine's fp8 under FSDP is not modelled (Megatron's distributed optimizer is)", "parallel(..., distributed_optimizer=True) instead of fsdp=True")
	case p.Compile.On():
		return fail("Transformer Engine's fp8 under torch.compile is not modelled (Megatron runs eagerly)", "drop compile=")
	case p.Quant != "" || p.LoRA != nil:
		return fail("Transformer Engine's fp8 with quant= or lora= is not modelled", "drop float8= for adapter fine-tuning")
	}
	return nil
}

// teConverts reports whether a linear of this role is a TE linear.
func (b *Builder) teConverts(role Role) bool {
	if !b.f8.TE() {
		return false
	}
	switch role {
	case RoleQ, RoleK, RoleV, RoleQKV, RoleO, RoleGate, RoleUp, RoleDown:
		return true
	}
	return false
}

// teLinear lowers a Transformer Engine linear computing [rows, in] x
// [in, out]^T on this rank (in and out local). x is the input as the
// layer holds it: bf16, or with sequence parallelism the fp8 gathered
// input TpGatherFP8 made. wFull is the unsharded weight's size (0: not
// sharded); bias is replicated unless biasFull > 0.
func (b *Builder) teLinear(name string, role Role, x Value, in, out, wFull, biasFull int64, bias bool) Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{out, in}, role)
	if wFull > 0 {
		b.ShardParam(w, wFull)
	}
	params := []int32{w}
	if bias {
		pb := b.Param("bias", []int64{out}, role)
		if biasFull > 0 {
			b.ShardParam(pb, biasFull)
		}
		params = append(params, pb)
	}
	hp := b.Prec.Compute
	trains := b.Trainable(w)
	var ins []Value
	var xgrad Value              // the bf16 tensor the input gradient flows to
	var saved Value              // what the wgrad GEMM keeps
	var gathered int64           // elements the backward gathers again (sequence parallelism)
	if b.Dtype(x) == units.FP8 { // gathered with sequence parallelism (TpGatherFP8)
		src := b.Op(b.Val(x).Producer).In[0] // the gathered fp8 shard; blockwise: the gathered bf16 input
		if b.f8.blockwise() {
			xgrad = b.Op(b.Val(src).Producer).In[0]
			saved = xgrad // the local bf16 input, gathered again in the backward
		} else {
			q := b.Op(b.Val(src).Producer) // the local quantization: rowwise, and with MXFP8 columnwise
			xgrad = q.In[0]
			saved = q.Out[len(q.Out)-1]
		}
		gathered = Numel(b.Shape(x))
		ins = []Value{x, xgrad}
	} else {
		xgrad = b.Cast(x, hp, "autocast copy of the TE linear's input")
		q, ok := b.teInput[xgrad] // Megatron fuses q/k/v and gate/up into one TE linear: one quantized input
		if !ok {
			q[0], q[1] = b.teQuantize("input", xgrad, trains)
			if b.teInput == nil {
				b.teInput = map[Value][2]Value{}
			}
			b.teInput[xgrad] = q
		}
		row, col := q[0], q[1]
		ins, saved = []Value{row, xgrad}, col
		if col != row {
			ins = append(ins, col)
		}
	}
	b.teWorkspaces(w, in, out, b.Grad(xgrad))
	rows := Rows(b.Shape(ins[0]))
	b.checkMXFP8Dims(rows, Rows(b.Shape(xgrad)), in, out) // te_mxfp8.go
	if rows%8 != 0 || in%16 != 0 || out%16 != 0 {         // the layout's (a rank's rows and shard): search() rejects it
		panic(&LayoutError{&units.Error{Path: b.Name(""), Msg: fmt.Sprintf("a Transformer Engine fp8 GEMM needs rows divisible by 8 and both dimensions divisible by 16 (assert_dim_for_fp8_exec), got %d rows, %d -> %d", rows, in, out),
			Hint: "drop float8=, or pick a batch, sequence, tp and layer widths that leave multiples of 8 and 16 on a rank"}})
	}
	i := b.AddOp("matmul", "", ins, params...)
	y := b.Out(i, "out", WithLast(b.Shape(ins[0]), out), hp, "output of Transformer Engine fp8 linear "+b.Name("")+" (bf16)")
	if trains {
		b.Save(i, saved)
	}
	op := b.Op(i)
	op.Flops = 2 * float64(rows) * float64(in) * float64(out)
	op.Bytes = float64(rows*in+in*out) + float64(hp.Bytes(rows*out)) // fp8 operands, bf16 output
	if b.Grad(xgrad) || trains {
		op.WorkB, op.BwdStream, op.BwdStreamK = b.teBackward(rows, in, out, gathered > 0, hp)
	}
	return y
}

// teQuantize lowers the input quantizer of a TE linear: one kernel
// writing the rowwise fp8 copy and, when the wgrad GEMM needs it, the
// columnwise one (a transpose on Hopper; on Blackwell the rowwise copy
// serves both; MXFP8 writes a second copy with its own scales on every
// GPU). Current scaling (te-tensorwise) reads the input once more for its
// amax first.
func (b *Builder) teQuantize(what string, x Value, columnwise bool) (row, col Value) {
	shape := b.Shape(x)
	i := b.AddOp("cast", what+"_fp8", []Value{x})
	row = b.Out(i, what+"_fp8", shape, units.FP8, "fp8 copy of the "+what+" (rowwise usage: read by the fprop GEMM, dropped after it)")
	col = row
	switch {
	case b.f8.mxfp8():
		b.Val(row).Why = "MXFP8 copy of the " + what + " with its e8m0 scales, one per 32 elements of a row (rowwise usage: read by the fprop GEMM, dropped after it)"
		if columnwise {
			col = b.Out(i, what+"_fp8_colwise", shape, units.FP8, "MXFP8 columnwise copy of the "+what+" with its scales, one per 32 elements of a column (saved for the wgrad GEMM)")
		}
	case columnwise && b.f8.transposes:
		t := append(append([]int64(nil), shape[:len(shape)-2]...), shape[len(shape)-1], shape[len(shape)-2])
		col = b.Out(i, what+"_fp8_t", t, units.FP8, "transposed fp8 copy of the "+what+" (columnwise usage: saved for the wgrad GEMM)")
	}
	rows, cols := Rows(shape), shape[len(shape)-1]
	b.withScales(row, rows, cols, true, false) // block-scaled recipes: their scales come with the data
	if col != row {
		b.withScales(col, rows, cols, false, true)
	}
	op := b.Op(i)
	op.NoGradB = true
	for _, v := range op.Out {
		b.Val(v).Grad = false
	}
	op.Bytes += float64(b.Val(x).Bytes)
	if b.f8.Scaling == "te-tensorwise" {
		op.Bytes += float64(b.Val(x).Bytes) // the amax pass
	}
	return row, col
}

// TpGatherFP8 is the sequence-parallel all-gather of a TE column-parallel
// linear's input: the local input quantized rowwise to fp8, gathered in
// fp8 (half the bytes of a bf16 gather); torchao's float8 linears under
// DTensor tensor parallelism cast and gather theirs likewise
// (aoGatherFP8). Without fp8 linears, TpGather.
func (b *Builder) TpGatherFP8(x Value) Value {
	if b.aoTP() {
		return b.aoGatherFP8(x) // torchao's PrepareFloat8ModuleInput (float8_tp.go)
	}
	if !b.f8.TE() || !b.Par.sp {
		return b.TpGather(x)
	}
	if b.f8.blockwise() {
		return b.tpGatherBlockwise(x) // te_blockwise.go: gathered in bf16
	}
	xl := b.Cast(x, b.Prec.Compute, "autocast copy of the TE linear's input")
	mx := b.f8.mxfp8()
	row, _ := b.teQuantize("input", xl, mx && !b.Eval) // MXFP8 keeps the local columnwise copy (linear.py)
	if !mx {
		b.Val(row).Why = "fp8 copy of the local input (rowwise; saved for the wgrad GEMM, which gathers it again)"
	}
	s := append([]int64(nil), b.Shape(row)...)
	s[len(s)-2] *= b.Par.Tp
	i := b.AddOp("all_gather", "sp_all_gather_fp8", []Value{row})
	y := b.Out(i, "gathered_fp8", s, units.FP8, "sequence-parallel all-gather of the fp8 input (freed after the column-parallel GEMMs)")
	b.withScales(y, Rows(s), s[len(s)-1], true, false)
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	n := b.Val(y).Bytes
	b.RecordCommUB("all_gather", n, i, false)                                                               // beside the readers' forward GEMMs with userbuffers
	b.RecordCommBeside("all_gather", "tp", Numel(s)+b.teScales(Rows(s), s[len(s)-1], false, true), i, true) // the backward gathers the saved shard again (MXFP8: its columnwise copy), beside the dgrad GEMMs
	b.RecordCommBeside("reduce_scatter", "tp", b.Prec.Compute.Bytes(Numel(s)), i, false)                    // the input gradient, beside the wgrad GEMMs
	return y
}

// teScales is the scale bytes of a quantized rows x cols tensor with the
// usages asked: MXFP8's e8m0 bytes (te_mxfp8.go), blockwise scaling's
// fp32 per 1x128 block (te_blockwise.go); nothing for the per-tensor
// recipes, whose scales are their modules' state.
func (b *Builder) teScales(rows, cols int64, rowwise, colwise bool) int64 {
	var n int64
	switch {
	case b.f8.mxfp8():
		if rowwise {
			n += mxfp8RowScales(rows, cols)
		}
		if colwise {
			n += mxfp8ColScales(rows, cols)
		}
	case b.f8.blockwise():
		if rowwise {
			n += blockwiseScales1D(rows, cols)
		}
		if colwise {
			n += blockwiseScales1D(cols, rows)
		}
	}
	return n
}

// withScales adds the scales of a quantized value of rows x cols (before
// any transpose) to its bytes and to its producer's traffic.
func (b *Builder) withScales(v Value, rows, cols int64, rowwise, colwise bool) {
	n := b.teScales(rows, cols, rowwise, colwise)
	b.Val(v).Bytes += n
	b.Op(b.Val(v).Producer).Bytes += float64(n)
}

// teBackward is a TE linear's backward workspace beyond the input and
// weight gradients, its cast traffic and kernels: grad_output (rows x out)
// quantized with both usages (one fp8 copy on Blackwell, two on Hopper
// and with MXFP8, whose scales come with them); with sequence parallelism
// (sp) the saved shard gathered again (rows x in in fp8, transposed on
// Hopper; MXFP8 gathers its columnwise copy) and the full-sequence input
// gradient (bf16) before its reduce-scatter.
func (b *Builder) teBackward(rows, in, out int64, sp bool, hp units.DType) (work int64, bytes float64, kernels int32) {
	g := rows * out
	copies := int64(1)
	if b.f8.transposes || b.f8.mxfp8() {
		copies = 2
	}
	work = copies*g + b.teScales(rows, out, true, true)
	bytes = float64(hp.Bytes(g) + work)
	kernels = 1
	if b.f8.Scaling == "te-tensorwise" {
		bytes += float64(hp.Bytes(g))
		kernels++
	}
	if sp {
		n := rows * in
		work += n + b.teScales(rows, in, false, true) + hp.Bytes(n)
		if b.f8.blockwise() { // gathered again in bf16, quantized columnwise (transposed) from it
			work += hp.Bytes(n)
			bytes += float64(hp.Bytes(n) + n)
			kernels++
			return work, bytes, kernels
		}
		if b.f8.transposes {
			work += n
			bytes += float64(2 * n)
			kernels++
		}
	}
	return work, bytes, kernels
}

// teWorkspaces registers what a TE module keeps between steps: its fp8
// weight (a workspace, or the parameter itself with fp8 primary weights),
// with its transpose when the input needs a gradient (dgrad), and its
// scaling state.
func (b *Builder) teWorkspaces(w int32, in, out int64, dgrad bool) {
	b.teWeightFP8(w, in, out, dgrad) // te_fp8_params.go
	b.teScalingState(1)
}

// teScalingState registers a TE module's scaling state for its gemms
// GEMMs (one for a Linear, one per expert for a GroupedLinear: base.py
// init_fp8_metadata(num_gemms)). te-mxfp8: MXFP8BlockScalingRecipeState
// holds no tensors (fp8.py).
func (b *Builder) teScalingState(gemms int64) {
	switch b.f8.Scaling {
	case "te-delayed":
		history := max(b.f8.AmaxHistory, 1) // Megatron's --fp8-amax-history-len, 1 by default
		b.Buffer("fp8_meta.scaling_fwd.scale", []int64{3 * gemms}, units.FP32, "delayed scaling: input, weight and output scales")
		b.Buffer("fp8_meta.scaling_fwd.amax_history", []int64{history, 3 * gemms}, units.FP32, "delayed scaling: amax history of the input, weight and output")
		b.Buffer("fp8_meta.scaling_bwd.scale", []int64{2 * gemms}, units.FP32, "delayed scaling: grad_output and grad_input scales")
		b.Buffer("fp8_meta.scaling_bwd.amax_history", []int64{history, 2 * gemms}, units.FP32, "delayed scaling: amax history of grad_output and grad_input")
	case "te-tensorwise":
		b.Buffer("quantizers.scale_amax", []int64{5 * gemms, 2}, units.FP32, "current scaling: a scale and an amax per quantizer (input, weight, output, grad_output, grad_input)")
	}
}

// teCublasWorkspace registers TE's cuBLAS workspace, one per process,
// when the program has a TE linear (module/base.py get_workspace: 32 MiB
// from compute capability 9.0, 4 MiB before; since TE 2.10 1 KiB more
// "for alignment and misc scales", cpp_extensions/gemm.py
// get_cublas_workspace_size_bytes, NVIDIA/TransformerEngine#2223, not
// counted: below what any measured row resolves).
func (b *Builder) teCublasWorkspace() {
	if !b.teSeen() && !b.teGemmSeen() { // an fp8 TE linear, or a bf16 one under Megatron (megatron_te.go)
		return
	}
	size := int64(4_194_304)
	if b.f8.cc9 {
		size = 33_554_432
	}
	b.P.Buffers = append(b.P.Buffers, bufferInfo{Name: "transformer_engine.cublas_workspace", Shape: []int64{size}, Dtype: units.INT8,
		Why: "Transformer Engine's cuBLAS workspace, shared by its GEMMs (module/base.py get_workspace)"})
	if b.teGroupedSeen() { // te_grouped.go
		b.P.Buffers = append(b.P.Buffers, bufferInfo{Name: "transformer_engine.multi_stream_cublas_workspace", Shape: []int64{teGroupedStreams, size}, Dtype: units.INT8,
			Why: "Transformer Engine's cuBLAS workspaces of the grouped GEMMs' streams (module/base.py get_multi_stream_cublas_workspace)"})
	}
}

// teSeen reports whether a TE linear was lowered (its weight workspace
// registered, or with fp8 primary weights its weight stored in fp8).
func (b *Builder) teSeen() bool {
	for _, bf := range b.P.Buffers {
		if strings.HasSuffix(bf.Name, ".weight_fp8") {
			return true
		}
	}
	return b.f8.ParamGather && slices.ContainsFunc(b.P.Params, func(p ParamInfo) bool { return p.GatherFP8 })
}

// teColLinear is a column-parallel TE linear over xg: the fp8 input
// TpGatherFP8 gathered with sequence parallelism; otherwise the
// replicated input, whose gradient is all-reduced in backward
// (copy_to_tensor_model_parallel_region).
func (b *Builder) teColLinear(name string, role Role, xg Value, in, outFull, outLocal int64, bias bool) Value {
	y := b.teLinear(name, role, xg, in, outLocal, outFull*in, outFull, bias)
	if !b.Par.sp && b.Grad(xg) {
		b.recordInputComm("all_reduce", xg, b.Prec.Compute.Bytes(Numel(b.Shape(xg))), b.Val(y).Producer, false)
	}
	return y
}
