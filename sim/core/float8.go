package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Float8 training as torchao runs it (torchao.float8.
// convert_to_float8_training, Float8Linear with dynamic scaling; torchao
// source read at 12396c648 (January 2025) and main (2026): the unified
// matmul_with_hp_or_float8_args). torchtitan converts every nn.Linear but
// the output head (float8.py: module_filter_fn = fqn != "output").
//
// Forward of a Float8Linear: the input (cast to the autocast dtype first)
// and the weight are each cast to float8_e4m3fn by
// hp_tensor_to_float8_dynamic: amax = max(abs(x)) (tensorwise: one scalar,
// aten.max; rowwise: one per row, aten.amax), scale = 448 / amax, then
// _ToFloat8ConstrFunc: x.to(float32) * scale, clamp, .to(float8); the
// scaled fp32 tensor is a local that lives until the fp8 copy is made.
// torch._scaled_mm multiplies the two in fp8 and writes the output in the
// input's dtype. The autograd.Function saves the high-precision input and
// the weight as it came (the parameter, or the fp8 weight FSDP2 gathered),
// nothing in fp8. torchao 0.7 (eab345c, December 2024) saved the fp8 input
// and fp8 weight instead in tensorwise mode; that release is modelled only
// under tensor parallelism (float8_tp.go).
//
// Backward: grad_output is cast to fp8 twice (once per GEMM; e4m3 or
// e5m2, one byte either way), the weight once more unless it is already fp8, the
// saved input once; torchao's preprocess_addmm copies each operand that
// is not in the layout _scaled_mm takes (the weight for grad_input;
// grad_output^T and the input for grad_weight). In eager mode the casts'
// fp32 temporaries and the backward's locals hold memory as counted in
// float8BackwardWork; compiled, Inductor fuses each cast (and its layout
// change) into one kernel that writes only the fp8 tensor.
//
// FSDP2 float8 all-gather (enable_fsdp_float8_all_gather, tensorwise
// only): each Float8Linear weight is a WeightWithDynamicFloat8CastTensor
// whose fsdp_pre_all_gather casts the shard to fp8 with a scale
// precomputed after the optimizer step
// (precompute_float8_dynamic_scale_for_fsdp: one inf-norm per weight, one
// all-reduce), so the gathered weight is fp8 (1 byte an element) and the
// forward casts no weight.

// Float8 is a plan's float8 training.
type Float8 struct {
	Scaling   string // "" (off), "tensorwise", "rowwise", or a Transformer Engine recipe "te-..." (te_fp8.go)
	AllGather bool   // FSDP2 gathers the converted weights in fp8
	// AmaxHistory is TE delayed scaling's amax history length (te_fp8.go); 0 or 1 by default.
	AmaxHistory int64
	// ParamGather: Megatron's --fp8-param-gather, TE's fp8 primary weights
	// (te_fp8_params.go).
	ParamGather bool

	transposes, cc9 bool // set for lowering by forDevice (te_fp8.go)
	// AutoFilter: torchao's _auto_filter_for_recipe (torchtitan's
	// filter_fqns entry "auto_filter_small_kn") also leaves linears too
	// small to gain from fp8 in high precision (float8AutoSkips).
	AutoFilter bool
}

// float8AutoSkips reports whether torchao's _auto_filter_for_recipe
// (torchao/float8/float8_linear_utils.py at 36027d8) leaves a linear of
// in features K and out features N unconverted for its size: tensorwise
// when K <= 4096 and N <= 1024; rowwise when N <= 2048, K <= 1024, or
// N <= 4096 and K <= 2048 (thresholds from torchao's H100 benchmarks).
func float8AutoSkips(scaling string, k, n int64) bool {
	if scaling == "rowwise" {
		return n <= 2048 || k <= 1024 || (n <= 4096 && k <= 2048)
	}
	return k <= 4096 && n <= 1024
}

// On reports whether linears are converted.
func (f Float8) On() bool { return f.Scaling != "" }

// Float8Scalings lists the scalings train(float8=...) takes.
func Float8Scalings() []string { return []string{"tensorwise", "rowwise"} }

// validateFloat8 checks float8 against the plan.
func (p *Plan) validateFloat8() error {
	f := p.Float8
	if f.ParamGather {
		if err := p.validateFP8ParamGather(); err != nil {
			return err
		}
	}
	if f.TE() && f.AutoFilter {
		return &units.Error{Path: "train", Msg: "float8_auto_filter=True is torchao's size filter; a Transformer Engine recipe has none", Hint: "drop float8_auto_filter"}
	}
	if f.TE() || f.AmaxHistory != 0 && f.AmaxHistory != 1 {
		return p.validateTEFloat8()
	}
	fail := func(msg, hint string) error { return &units.Error{Path: "train", Msg: msg, Hint: hint} }
	if !f.On() {
		if f.AllGather {
			return fail("fsdp_float8_all_gather=True needs float8 linears", `add float8="tensorwise"`)
		}
		if f.AutoFilter {
			return fail("float8_auto_filter=True needs float8 linears", `add float8="tensorwise" or "rowwise"`)
		}
		return nil
	}
	if f.Scaling != "tensorwise" && f.Scaling != "rowwise" {
		return fail(fmt.Sprintf("unknown float8 scaling %q (known: tensorwise, rowwise, %s)", f.Scaling, strings.Join(TEFloat8Recipes(), ", ")), `float8="tensorwise" or "rowwise" (torchao), "te-delayed" (Transformer Engine)`)
	}
	if p.Device.FP8TFLOPS <= 0 {
		return fail(fmt.Sprintf("float8 training needs fp8 tensor cores (compute capability 8.9 or later: Ada, Hopper, Blackwell); %s has none", p.Device.Name),
			`train on an H100 (gpu="H100-80GB") or drop float8=`)
	}
	if f.AllGather && f.Scaling != "tensorwise" {
		return fail("fsdp_float8_all_gather=True needs tensorwise scaling (torchao's WeightWithDynamicFloat8CastTensor casts with one scale per weight)",
			`float8="tensorwise", or fsdp_float8_all_gather=False`)
	}
	if f.AllGather && (!p.Parallel.FSDP || p.Parallel.FSDPVersion == 1) {
		return fail("fsdp_float8_all_gather=True needs FSDP2 (fully_shard's all-gather extensions; torchtitan enables it only when the data-parallel dimension is sharded)",
			"parallel(dp=..., fsdp=True), or fsdp_float8_all_gather=False")
	}
	if p.Quant != "" || p.LoRA != nil {
		return fail("float8 linears with quant= or lora= are not modelled", "drop float8= for adapter fine-tuning")
	}
	if p.Parallel.Norm().TP > 1 {
		return p.validateFloat8TP() // float8_tp.go
	}
	return nil
}

// float8Converts reports whether a linear of this role becomes a
// Float8Linear.
func (b *Builder) float8Converts(role Role) bool {
	return b.f8.On() && !b.f8.TE() && role != RoleLMHead && role != RoleLoRA && role != RoleAdapter && role != RoleConv && role != RoleConvLeaf
}

// float8Linear lowers a Float8Linear; ok is false (nothing added) when the
// plan does not convert this linear.
func (b *Builder) float8Linear(name string, role Role, x Value, in, out int64, bias bool) (Value, bool) {
	if !b.float8Converts(role) {
		return NoValue, false
	}
	if in%16 != 0 || out%16 != 0 {
		// torchtitan's module_filter_fn (components/quantization/utils.py
		// at b5bcd76, since a6524d8 of April 2025) converts only linears
		// whose dimensions are multiples of 16 (torch._scaled_mm's
		// alignment) and leaves the others as they are.
		s := fmt.Sprintf("%s (%d -> %d)", name, in, out)
		if !slices.Contains(b.P.Float8Skipped, s) {
			b.P.Float8Skipped = append(b.P.Float8Skipped, s)
		}
		return NoValue, false
	}
	if b.f8.AutoFilter && float8AutoSkips(b.f8.Scaling, in, out) {
		return NoValue, false // the plan asked for the size filter: no note
	}
	b.float8TokensAligned(name, x)
	defer b.Scope(name)()
	w, _ := b.LinearParams(role, in, out, false)
	hp := b.Dtype(x)
	if b.Prec.Autocast {
		hp = b.Prec.Compute // Float8Linear.forward: input.to(autocast dtype)
	}
	xin := b.Cast(x, hp, "autocast copy of the float8 linear's input")
	rows := Rows(b.Shape(xin))
	rowwise := b.f8.Scaling == "rowwise"
	x8 := b.fp8Cast("input", xin, -1, b.Shape(xin), rowwise)
	ins := []Value{x8, xin}
	if b.f8.AllGather {
		b.P.Params[w].GatherFP8 = true
	} else {
		ins = append(ins, b.fp8Cast("weight", NoValue, w, []int64{out, in}, rowwise))
	}
	i := b.AddOp("matmul", "", ins, w)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), hp, "output of float8 linear "+b.Name("")+" (torch._scaled_mm)")
	if b.Trainable(w) {
		b.Save(i, xin) // input_hp; weight_hp_t is the parameter (or its gathered fp8 copy)
	}
	op := b.Op(i)
	op.ScaledMM = true
	op.Flops = 2 * float64(rows) * float64(in) * float64(out)
	op.Bytes += float64(rows*in + in*out)
	if b.Grad(xin) || b.Trainable(w) {
		wc := !b.f8.AllGather
		op.WorkB = float8BackwardWork(rows*out, rows*in, out*in, wc, b.graph)
		op.BwdStream, op.BwdStreamK = float8BackwardCasts(rows*out, rows*in, out*in, hp, b.Prec.Params, wc, b.graph)
	}
	if bias {
		pb := b.Param("bias", []int64{out}, role)
		j := b.AddOp("add", "bias", []Value{y}, pb) // output + self.bias.to(output.dtype)
		y = b.Out(j, "biased", b.Shape(y), hp, "float8 linear output plus its bias")
		b.Op(j).Flops = float64(Numel(b.Shape(y)))
	}
	return y, true
}

// fp8Cast lowers hp_tensor_to_float8_dynamic of x (or of parameter pi
// when x is NoValue) of the given shape: abs, the amax reduction, the
// fp32 upcast (none when x is fp32 already), the multiply by the scale,
// the clamp and the fp8 copy. Everything runs inside an
// autograd.Function's forward: no op records a graph.
func (b *Builder) fp8Cast(what string, x Value, pi int32, shape []int64, rowwise bool) Value {
	var ins []Value
	hp := b.Prec.Params // the weight as the forward reads it (under FSDP2, param_dtype: tp.go)
	if x != NoValue {
		ins, hp = []Value{x}, b.Dtype(x)
	}
	name := what + "_fp8"
	n := Numel(shape)
	a := b.castStep("abs", name+".abs", ins, shape, hp, "abs of the "+what+" for its amax (float8 cast)")
	if x == NoValue { // the parameter is read from its storage
		b.Op(b.Val(a).Producer).Bytes += float64(hp.Bytes(n))
	}
	kind, sshape := "max", []int64{} // tensor_to_amax: torch.max(torch.abs(x))
	if rowwise {
		kind, sshape = "amax", WithLast(shape, 1) // torch.amax(abs, dim=-1, keepdim=True)
		if x == NoValue {
			sshape = []int64{1, shape[0]} // the weight's scales run along its output rows
		}
	}
	m := b.castStep(kind, name+".amax", []Value{a}, sshape, units.FP32, "amax and scale of the "+what+" (float8 cast)")
	scaleIns := append(append([]Value(nil), ins...), m)
	if hp != units.FP32 {
		f := b.castStep("cast", name+".fp32", ins, shape, units.FP32, "fp32 copy of the "+what+" (_ToFloat8ConstrFunc: tensor.to(float32))")
		if x == NoValue {
			b.Op(b.Val(f).Producer).Bytes += float64(hp.Bytes(n))
		}
		scaleIns = []Value{f, m}
	}
	s := b.castStep("mul", name+".scaled", scaleIns, shape, units.FP32, "the "+what+" times its fp8 scale (fp32, a local until the cast returns)")
	c := b.castStep("clamp", name+".clamped", []Value{s}, shape, units.FP32, "the scaled "+what+" clamped to the fp8 range (to_fp8_saturated)")
	y := b.castStep("cast", name, []Value{c}, shape, units.FP8, "fp8 copy of the "+what+" (float8_e4m3fn) read by torch._scaled_mm")
	b.KeepAlive(name+".scaled_local", s)
	for _, v := range []Value{a, s, c} {
		b.Op(b.Val(v).Producer).Flops = float64(n)
	}
	return y
}

// castStep adds one op of a float8 cast: its output records no graph.
func (b *Builder) castStep(kind, name string, ins []Value, shape []int64, dt units.DType, why string) Value {
	i := b.AddOp(kind, name, ins)
	y := b.Out(i, name, shape, dt, why)
	b.Val(y).Grad = false
	op := b.Op(i)
	op.NoGradB = true
	for _, v := range ins {
		op.Bytes += float64(b.Val(v).Bytes)
	}
	return y
}

// float8BackwardWork is the most memory a Float8Linear's backward holds at
// once besides the input and weight gradients, in bytes (fp8: one byte an
// element), for grad_output of g elements, the input of x, the weight of
// w; wc: the weight is cast again (not gathered in fp8). In the order of
// matmul_with_hp_or_float8_args.backward:
//
//	1 cast grad_output (dim 0)             peak c·g, then g held
//	2 cast the weight (wc)                 peak g + c·w, then g + w held
//	3 grad_input = mm: the weight copied   g + w·wc + w
//	  to the layout _scaled_mm takes
//	4 cast grad_output again (dim 1)       peak g + w·wc + c·g
//	5 cast the input (dim 1)               peak 2g + w·wc + c·x
//	6 grad_weight = mm: grad_output^T and  2g + w·wc + x + g + x
//	  the input copied
//
// c is a cast's peak per element: in eager mode 9 (the fp32 scaled
// tensor, the fp32 clamped one and the fp8 copy live at once; abs's
// temporary is freed before them), and the backward's locals keep every
// cast until it returns. Compiled, a cast is one fused kernel writing its
// fp8 tensor in the layout the GEMM reads, and a buffer is freed after its
// last use: the two GEMMs hold g + w and g + x.
func float8BackwardWork(g, x, w int64, wc, compiled bool) int64 {
	if compiled {
		return max(g+w, g+x)
	}
	const c = 9
	var wcast int64
	if wc {
		wcast = w
	}
	return max(c*g, g+c*wcast, g+wcast+w, g+wcast+c*g, 2*g+wcast+c*x, 3*g+wcast+2*x)
}

// float8BackwardCasts is the HBM traffic and kernels of a Float8Linear
// backward's casts (float8CastTraffic) and copies (its GEMMs are priced
// from the op's shape). Each layout copy reads and writes n.
func float8BackwardCasts(g, x, w int64, hp, whp units.DType, wc, compiled bool) (bytes float64, kernels int32) {
	cast := func(n int64, dt units.DType) {
		b, k := float8CastTraffic(n, dt, compiled)
		bytes, kernels = bytes+b, kernels+k
	}
	cast(g, hp)
	if wc {
		cast(w, whp)
	}
	cast(g, hp)
	cast(x, hp)
	copies := w
	if !compiled {
		copies += g + x
	}
	bytes += 2 * float64(copies)
	return bytes, kernels + 3
}

// float8CastTraffic is the HBM traffic and kernels of torchao's dynamic
// cast of n elements in dtype dt to fp8: compiled, one amax pass and one
// cast pass (2·dt·n read, n written; two kernels); eager, abs (dt·n in
// and out), max (dt·n in), the fp32 upcast (dt·n in, 4n out; none from
// fp32), the scale multiply and the clamp (4n in, 4n out each), the fp8
// copy (4n in, n out): six kernels, five from fp32.
func float8CastTraffic(n int64, dt units.DType, compiled bool) (bytes float64, kernels int32) {
	h, f := float64(dt.Bytes(1)), float64(n)
	if compiled {
		return (2*h + 1) * f, 2
	}
	bytes, kernels = 3*h*f+8*f+8*f+5*f, 5
	if dt != units.FP32 {
		bytes, kernels = bytes+(h+4)*f, kernels+1
	}
	return bytes, kernels
}

// float8TokensAligned refuses, as the layout's (LayoutError), a training
// Float8Linear whose input holds a count of tokens (rows) that is not a
// multiple of 16: the tokens are the inner dimension K of the
// grad_weight GEMM (grad_output^T @ input), and torch._scaled_mm needs
// K and N multiples of 16; torchao pads them only with
// Float8LinearConfig(pad_inner_dim=True), off by default
// (torchao/float8/config.py). The forward's K and N are the linear's own
// dimensions, checked where it converts.
func (b *Builder) float8TokensAligned(name string, x Value) {
	if rows := Rows(b.Shape(x)); !b.Eval && rows%16 != 0 {
		panic(&LayoutError{&units.Error{Path: b.Name(name), Msg: fmt.Sprintf("%s's input holds %d tokens on a rank, not a multiple of 16: its float8 grad_weight GEMM (tokens are its inner dimension) is one torch._scaled_mm refuses (torchao pads it only with pad_inner_dim=True, off by default)", name, rows),
			Hint: "a micro-batch x sequence (over cp) that is a multiple of 16, or drop float8="}})
	}
}
