package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Quantization-aware training as torchao runs it (torchao 0.18.0,
// torchao/quantization/qat: linear.py, fake_quantizer.py, utils.py and
// quant_primitives.py), through torchtune's QAT recipes
// (torchtune/training/quantization.py: Int8DynActInt4WeightQATQuantizer,
// QATLoRALinear in torchtune/modules/peft/lora.py) or Axolotl's qat: block.
//
// Int8DynActInt4WeightQATQuantizer(groupsize=G).prepare swaps every
// nn.Linear whose in_features G divides (_replace_linear_8da4w; the
// output head too when it is an nn.Linear) for an
// Int8DynActInt4WeightQATLinear, whose forward is
//
//	x = activation_fake_quantizer(x)   # int8, per token, asymmetric
//	w = weight_fake_quantizer(weight)  # int4, per group of G, symmetric
//	F.linear(x, w, bias)
//
// Each fake quantizer computes its scales and zero points without
// autograd (choose_qparams_affine is @torch.no_grad; the per-group ones
// from a detached weight), fp32 tensors of one element a token or a
// group, then _fake_quantize_affine in the tensor's dtype d:
//
//	inv   = 1.0 / scale                        fp32, a scale each
//	A     = x * inv                             fp32 (d * fp32 promotes)  saves inv
//	B     = _Round.apply(A)                     fp32, gradient straight through
//	C     = B + zero_point                      fp32
//	D     = clamp(C, qmin, qmax)                fp32                      saves C
//	E     = D.to(d, copy=True)                  d (a copy even in fp32)
//	F     = E - zero_point.to(d)                d
//	G     = F * scale                           fp32                      saves scale
//	H     = G.view(shape).to(d)                 d (G itself in fp32)
//
// D is _do_fake_quantize_affine's q, a local until it returns (after H);
// E, F and G are freed as the next is made. So a fake-quantized tensor of
// n elements saves 4n bytes (C) and two fp32 scale tensors, and its
// forward holds at most C + D + F + G (+ H): 14n bytes in bf16, 16n in
// fp32. F.linear saves the fake-quantized input and weight (H), not the
// linear's own input. Measured with tools/oracle/hf_block_saved.py's
// qat=G on the CPU (sim/qat_test.go).
//
// Under LoRA (torchtune's QATLoRALinear, swap_lora_linear_with_qat) only
// the adapted linears are swapped: the frozen weight is fake-quantized
// without autograd (nothing saved), the input as above, and the adapter
// reads the linear's own input.

// QAT is a plan's quantization-aware training.
type QAT struct {
	// Scheme is "" (off), "8da4w" (torchao's
	// Int8DynActInt4WeightQATQuantizer: int8 per-token activations,
	// int4 per-group symmetric weights; torchtune's quantizer mode name)
	// or "int8-int4" (Axolotl's qat: activation_dtype int8, weight_dtype
	// int4: torchao's QATConfig with the same activations and
	// Int4WeightFakeQuantizeConfig weights, qat_int4.go).
	Scheme string
	// GroupSize is the weights' group (groupsize; torchao's default 256).
	GroupSize int64
	// NoHead leaves the output head a plain linear: torchtune's
	// TiedLinear, which is no nn.Linear, or an untied head not swapped.
	NoHead bool
}

// On reports whether linears are fake-quantized.
func (q QAT) On() bool { return q.Scheme != "" }

// QATSchemes lists the schemes train(qat=...) takes.
func QATSchemes() []string { return []string{"8da4w", "int8-int4"} }

// qatRefused names the QAT schemes memsh knows and does not model, with
// why.
var qatRefused = map[string]string{
	"4w":    "torchao's Int4WeightOnlyQATQuantizer (weights only, asymmetric, tinygemm's float zero point) is not modelled",
	"nvfp4": "NVFP4 fake quantization (torchao's NVFP4FakeQuantizeConfig) is not modelled",
	"mxfp4": "MXFP4 fake quantization (torchao's MX fake quantizers) is not modelled",
	"fp8":   "float8 fake quantization (torchao's Float8FakeQuantizeConfig) is not modelled",
}

// validateQAT checks qat against the plan.
func (p *Plan) validateQAT() error {
	q := p.QAT
	fail := func(msg, hint string) error { return &units.Error{Path: "train", Msg: msg, Hint: hint} }
	if !q.On() {
		if q.NoHead {
			return fail("qat_head=False needs qat=", `add qat="8da4w"`)
		}
		return nil
	}
	if why, ok := qatRefused[q.Scheme]; ok {
		return fail(fmt.Sprintf("qat=%q: %s", q.Scheme, why), `qat="8da4w" (int8 per-token activations, int4 per-group weights), or drop qat=`)
	}
	if q.Scheme != "8da4w" && q.Scheme != "int8-int4" {
		return fail(fmt.Sprintf("unknown qat scheme %q (known: 8da4w, int8-int4)", q.Scheme), `qat="8da4w": torchao's Int8DynActInt4WeightQATQuantizer; "int8-int4": Axolotl's qat: int8 activations, int4 weights`)
	}
	if q.Scheme == "int8-int4" && p.LoRA != nil {
		return fail(`qat="int8-int4" with lora= is not modelled (Axolotl swaps every linear before PEFT wraps them)`, `qat="8da4w" (torchtune's QAT-LoRA), or drop lora=`)
	}
	if q.GroupSize <= 0 {
		return fail(fmt.Sprintf("qat_group_size must be positive (got %d)", q.GroupSize), "torchao's groupsize, 256 by default (torchtune's QAT configs use 256)")
	}
	if p.Precision.Autocast && p.Precision.Params != p.Precision.Compute {
		return fail(fmt.Sprintf("qat= under autocast with %s weights is not modelled (autocast would cast each fake-quantized weight anew)", p.Precision.Params.Name()),
			`precision="bf16" (torchtune's dtype: bf16) or "fp32"`)
	}
	switch {
	case p.Float8.On():
		return fail("qat= with float8= is not modelled", "drop one of them")
	case p.Quant != "":
		return fail("qat= with quant= (frozen quantized base weights) is not modelled", "drop quant=")
	case p.Compile.On():
		return fail("qat= with compile= is not modelled (torchtune's QAT recipes refuse compile: \"Compile is not yet supported for QAT\")", "compile=False")
	case p.Parallel.Norm().TP > 1:
		return fail("qat= with tensor parallelism is not modelled (per-group scales over a sharded in_features)", "tp=1 (FSDP shards QAT as it does any linear)")
	case p.LoRA != nil && p.LoRA.Pattern == "" && len(p.LoRA.TargetParameters) > 0:
		return fail("qat= with LoRA's target_parameters is not modelled", "drop target_parameters")
	}
	return nil
}

// refuseQATHead refuses (LowerError) a swapped output head that a
// chunked or fused loss runs itself: torchtune's LinearCrossEntropyLoss
// calls the swapped output module on each chunk of hidden states, which
// fake-quantizes the whole output weight again for every chunk (and
// F.linear saves a copy each time); Liger's, CCE's and TRL's heads read
// the weight directly. Neither is modelled.
func (b *Builder) refuseQATHead(m *Model) {
	q := b.qat
	if !q.On() || q.NoHead || b.Eval {
		return
	}
	special := b.pref.FusedHead() || b.Ft.chunkHead(m) || b.Ft.ligerHead(m) || b.Ft.titanHead(m) || b.Ft.cceHead(m) || b.Ft.trlHead(m)
	if !special || b.Lora != nil && !b.Lora.Adapts(RoleLMHead, m.Head()) {
		return
	}
	panic(LowerError{&units.Error{Path: m.Head(),
		Msg:  "qat= on the output head with a chunked or fused loss is not modelled (torchtune's LinearCrossEntropyLoss runs the swapped head on each chunk, fake-quantizing the whole output weight every time)",
		Hint: "qat_head=False (torchtune's tied head, TiedLinear, is never swapped), or an unchunked loss"}})
}

// qatConverts reports whether the linear of this role (in features in,
// the Builder's scope at the linear) is swapped for a fake-quantized one.
func (b *Builder) qatConverts(role Role, in int64) bool {
	q := b.qat
	if !q.On() || b.Eval {
		return false
	}
	if in%q.GroupSize != 0 {
		if q.Scheme == "int8-int4" && role != RoleLoRA && role != RoleAdapter && role != RoleConv && role != RoleConvLeaf && (role != RoleLMHead || !q.NoHead) {
			// quantize_(model, QATConfig(...)) swaps every nn.Linear;
			// Int4WeightFakeQuantizer's view(out, -1, group_size) then fails
			panic(LowerError{units.Errorf(b.Name(""), "qat=\"int8-int4\": in_features %d is not a multiple of qat_group_size %d (torchao's Int4WeightFakeQuantizer views the weight in groups and fails)", in, q.GroupSize)})
		}
		return false // _replace_linear_8da4w's filter: in_features % groupsize == 0
	}
	switch role {
	case RoleLoRA, RoleAdapter, RoleConv, RoleConvLeaf, RoleRouter:
		return false
	case RoleLMHead:
		if q.NoHead {
			return false
		}
	}
	if b.Lora != nil {
		return b.adapts(role) // swap_lora_linear_with_qat: LoRALinear modules only
	}
	return true
}

// qatLinear lowers an Int8DynActInt4WeightQATLinear (or torchtune's
// QATLoRALinear); ok is false (nothing added) when the plan does not
// convert this linear.
func (b *Builder) qatLinear(name string, role Role, x Value, in, out int64, bias bool) (Value, bool) {
	if !b.qat.On() {
		return NoValue, false
	}
	end := b.Scope(name)
	if !b.qatConverts(role, in) {
		end()
		return NoValue, false
	}
	defer end()
	if role == RoleRouter {
		panic(LowerError{units.Errorf(b.Name(""), "qat= on a router is not modelled")})
	}
	w, params := b.LinearParams(role, in, out, bias)
	xq, xqp := b.fakeQuant("activation_fake_quantizer", x, -1, b.Shape(x), Rows(b.Shape(x)))
	var wq Value
	var wqp [2]Value
	if b.qat.Scheme == "int8-int4" {
		wq, wqp = b.fakeQuantInt4Weight(w, out, in, b.qat.GroupSize) // qat_int4.go
	} else {
		wq, wqp = b.fakeQuant("weight_fake_quantizer", NoValue, w, []int64{out, in}, out*(in/b.qat.GroupSize))
	}
	i := b.AddOp("matmul", "", []Value{xq, wq}, params[1:]...)
	dt := b.Dtype(xq)
	y := b.Out(i, "out", WithLast(b.Shape(xq), out), dt, b.Concat("output of fake-quantized linear ", b.Name("")))
	if b.Grad(wq) {
		b.Save(i, xq)
	}
	if b.Grad(xq) {
		b.Save(i, wq)
	}
	t := Rows(b.Shape(xq))
	b.Op(i).Flops = 2 * float64(t) * float64(in) * float64(out)
	b.Op(i).Bytes += float64(b.Val(xq).Bytes) + float64(b.Val(wq).Bytes)
	// The quantizers keep their scale and zero_point as attributes
	// (self.scale, self.zero_point) until their next forward; memsh holds
	// them to the end of the linear's forward.
	b.KeepAlive("fake_quantizers.qparams", xqp[0], xqp[1], wqp[0], wqp[1])
	if b.adapts(role) {
		y = b.loraAdapter(x, y, in, out) // QATLoRALinear: lora_a(dropout(x)), the input before its fake quantization
	}
	return y, true
}

// fakeQuant lowers one fake quantizer's forward over x (or parameter pi
// when x is NoValue) of the given shape, with s scales: the qparams
// (no autograd), then _fake_quantize_affine's steps (the table above).
// It returns the fake-quantized tensor, in x's dtype, and the scale and
// zero point.
func (b *Builder) fakeQuant(what string, x Value, pi int32, shape []int64, s int64) (Value, [2]Value) {
	var ins []Value
	var params []int32
	d := b.Prec.Params // the weight as the forward reads it
	if x != NoValue {
		ins, d = []Value{x}, b.Dtype(x)
	} else {
		params = []int32{pi}
	}
	defer b.Scope(what)() // the quantizer is a submodule of the linear: its own module row
	n := Numel(shape)
	qs := []int64{s}
	qp := b.AddOp("qparams", "qparams", ins, params...) // choose_qparams_affine, @torch.no_grad
	scale := b.Out(qp, "scale", qs, units.FP32, "fake quantizer's scales (fp32, one a token or a group)")
	zp := b.Out(qp, "zero_point", qs, units.FP32, "fake quantizer's zero points (fp32)")
	for _, v := range []Value{scale, zp} {
		b.Val(v).Grad = false
	}
	b.Op(qp).NoGradB = true
	b.Op(qp).Bytes += float64(d.Bytes(n))
	b.Op(qp).Flops = 2 * float64(n)
	inv := b.castStep("reciprocal", "inv_scale", []Value{scale}, qs, units.FP32, "1.0 / scale (fp32)")
	// step adds one elementwise op of the tensor's shape.
	step := func(kind, name string, in []Value, ps []int32, dt units.DType, why string) (int32, Value) {
		i := b.AddOp(kind, name, in, ps...)
		y := b.Out(i, name, shape, dt, why)
		op := b.Op(i)
		op.FakeQuant = true
		op.Flops = float64(n)
		for _, v := range in {
			op.Bytes += float64(b.Val(v).Bytes)
		}
		if len(ps) > 0 {
			op.Bytes += float64(d.Bytes(n)) // the weight read from its storage
		}
		return i, y
	}
	ia, a := step("mul", "scaled", append(ins, inv), params, units.FP32, "the tensor times 1/scale (fp32)")
	b.Save(ia, inv)
	if d != units.FP32 && b.Grad(a) {
		b.Op(ia).WorkB = 4 * n // the gradient times 1/scale in fp32, cast to the tensor's dtype after
	}
	ir, r := step("round", "rounded", []Value{a}, nil, units.FP32, "rounded (_Round: the gradient passes straight through)")
	b.Op(ir).GradInPlace = true
	ic, c := step("add", "shifted", []Value{r, zp}, nil, units.FP32, "rounded plus the zero point (fp32, saved by clamp)")
	b.Op(ic).GradInPlace = true
	id, q := step("clamp", "q", []Value{c}, nil, units.FP32, "clamped to the integer range (fp32; _do_fake_quantize_affine's q, a local until it returns)")
	b.Save(id, c)
	if b.Grad(q) {
		b.Op(id).WorkB, b.Op(id).WorkBParts = 2*n, 2 // clamp's backward: the gt and lt masks (bool) where() reads
	}
	_, e := step("cast", "q_copy", []Value{q}, nil, d, "q.to(dtype, copy=True) (_dequantize_affine_no_dtype_check)")
	zd := zp
	if d != units.FP32 {
		zd = b.castStep("cast", "zero_point."+d.Name(), []Value{zp}, qs, d, "zero_point.to(dtype)")
	}
	isub, f := step("sub", "centered", []Value{e, zd}, nil, d, "q minus the zero point")
	b.Op(isub).GradInPlace = true
	ig, g := step("mul", "dequantized", []Value{f, scale}, nil, units.FP32, "times the scale (fp32)")
	b.Save(ig, scale)
	if d != units.FP32 && b.Grad(g) {
		b.Op(ig).WorkB = 4 * n // the gradient times the scale in fp32, cast to the tensor's dtype after
	}
	h := g
	if d != units.FP32 {
		_, h = step("cast", "fake_quantized", []Value{g}, nil, d, "the fake-quantized tensor in its dtype")
	}
	b.KeepAlive("q_local", q)
	return h, [2]Value{scale, zp}
}
