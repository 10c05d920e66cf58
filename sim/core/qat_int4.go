package core

import "github.com/memsh/memsh/sim/units"

// Axolotl's qat: block with activation_dtype int8 and weight_dtype int4
// (axolotl/utils/quantization.py, _make_qat_config) swaps every nn.Linear
// through torchao's quantize_(model, QATConfig(activation_config=
// IntxFakeQuantizeConfig(int8, "per_token", is_symmetric=False),
// weight_config=Int4WeightFakeQuantizeConfig(group_size,
// activation_dtype=bf16))). The activations are fake-quantized as under
// Int8DynActInt4WeightQATQuantizer (qat.go; the zero point int32, the
// same bytes); the weights by Int4WeightFakeQuantizer's
// _bf16_activations_forward (torchao 0.18.0, qat/fake_quantizer.py),
// asymmetric per group and with autograd through the scales, in the
// weight's dtype d (n elements, s groups):
//
//	W = w.to(fp32).view(out, -1, g)          fp32 (the weight itself in fp32)
//	mx, mn = amax(W), amin(W)                fp32 s     each saves W and its result
//	scale = clamp(mx - mn, 1e-6) / 15        fp32 s     clamp saves mx - mn
//	zp = mn + scale * 8                      fp32 s
//	A = W - mn                               fp32
//	B = A / scale                            fp32       saves A and scale
//	R = _Round.apply(B)                      fp32       straight through
//	C = R.clamp(0, 15)                       fp32       saves R
//	D = C - 8                                fp32
//	E = D * scale                            fp32       saves D and scale
//	F = E + zp                               fp32
//	H = F.view(w.shape).to(d)                d (F itself in fp32)
//
// W, mx, mn, scale and zp are locals until the function returns; A, B,
// C, D, E and F go as the next is made (A, R, D saved). A trainable bf16
// weight of n elements keeps 16n bytes (W, A, R, D) and four fp32 group
// tensors, and its forward peaks at the add: W, A, R, D, E and F, 24n
// (sim/qat_test.go, tools/oracle/qat_linear.py int8-int4).

// fakeQuantInt4Weight lowers Int4WeightFakeQuantizer's forward over
// weight pi ([out, in], groups of g); it returns the fake-quantized
// weight and its scale and zero point.
func (b *Builder) fakeQuantInt4Weight(pi int32, out, in, g int64) (Value, [2]Value) {
	defer b.Scope("weight_fake_quantizer")()
	d := b.Prec.Params
	n, s := out*in, out*(in/g)
	shape, qs := []int64{out, in}, []int64{s}
	// op adds one step; params when it reads the weight itself (fp32).
	op := func(kind, name string, in []Value, ps []int32, sh []int64, why string) (int32, Value) {
		i := b.AddOp(kind, name, in, ps...)
		y := b.Out(i, name, sh, units.FP32, why)
		o := b.Op(i)
		o.FakeQuant = true
		o.Flops = float64(Numel(sh))
		for _, v := range in {
			o.Bytes += float64(b.Val(v).Bytes)
		}
		if len(ps) > 0 {
			o.Bytes += float64(d.Bytes(n))
		}
		return i, y
	}
	w32, wIn, wPs := NoValue, []Value(nil), []int32{pi}
	if d != units.FP32 {
		_, w32 = op("cast", "weight.float32", nil, wPs, shape, "w.to(float32) (Int4WeightFakeQuantizer)")
		wIn, wPs = []Value{w32}, nil
	}
	imx, mx := op("amax", "max_val", wIn, wPs, qs, "the groups' max (fp32)")
	b.Save(imx, w32, mx)
	imn, mn := op("amin", "min_val", wIn, wPs, qs, "the groups' min (fp32)")
	b.Save(imn, w32, mn)
	_, rng := op("sub", "range", []Value{mx, mn}, nil, qs, "max - min")
	icl, cl := op("clamp", "range_clamped", []Value{rng}, nil, qs, "clamp(max - min, 1e-6)")
	b.Save(icl, rng)
	_, scale := op("div", "scale", []Value{cl}, nil, qs, "the groups' scales (fp32)")
	_, s8 := op("mul", "scale_8", []Value{scale}, nil, qs, "scale * 8")
	_, zp := op("add", "zero_point", []Value{mn, s8}, nil, qs, "the groups' zero points (fp32)")
	ia, a := op("sub", "shifted", append(wIn, mn), wPs, shape, "the weight less its group's min (fp32)")
	b.Op(ia).GradInPlace = true
	ib, bb := op("div", "scaled", []Value{a, scale}, nil, shape, "divided by the scale (fp32)")
	b.Save(ib, a, scale)
	ir, r := op("round", "rounded", []Value{bb}, nil, shape, "rounded (_Round: the gradient passes straight through)")
	b.Op(ir).GradInPlace = true
	ic, c := op("clamp", "q", []Value{r}, nil, shape, "clamped to 0..15 (fp32)")
	b.Save(ic, r)
	if b.Grad(c) {
		b.Op(ic).WorkB, b.Op(ic).WorkBParts = 2*n, 2 // clamp's backward: the gt and lt masks (bool)
	}
	isub, dd := op("sub", "centered", []Value{c}, nil, shape, "q - 8 (fp32)")
	b.Op(isub).GradInPlace = true
	ie, e := op("mul", "dequantized", []Value{dd, scale}, nil, shape, "times the scale (fp32)")
	b.Save(ie, dd, scale)
	_, f := op("add", "fake_quantized.float32", []Value{e, zp}, nil, shape, "plus the zero point (fp32)")
	h := f
	if d != units.FP32 {
		i := b.AddOp("cast", "fake_quantized", []Value{f})
		h = b.Out(i, "fake_quantized", shape, d, "the fake-quantized weight in its dtype")
		o := b.Op(i)
		o.FakeQuant = true
		o.Bytes += float64(b.Val(f).Bytes)
	}
	b.KeepAlive("locals", w32, mx, mn, scale)
	return h, [2]Value{scale, zp}
}
