package sim

import (
	"math"

	"github.com/memsh/memsh/sim/units"
)

// Lowering helpers: one func per PyTorch op family, each saving for backward
// what autograd saves (derivatives.yaml), with autocast dtypes.

// weight returns the value a matmul reads for parameter pi: under autocast
// with fp32 weights, a cached low-precision copy (autocast's weight cache
// keeps casts of leaf tensors that require grad until the forward ends);
// otherwise the parameter itself (noValue).
func (b *builder) weight(pi int32, dt units.DType) Value {
	p := b.p.Params[pi]
	if !b.prec.Autocast || b.prec.Params == dt {
		return NoValue
	}
	i := b.addOp("cast", "to_"+dt.Name(), nil, pi)
	y := b.out(i, lastSegment(p.Name)+"."+dt.Name(), p.shape, dt, "autocast "+dt.Name()+" copy of weight "+p.Name)
	v := b.val(y)
	v.Cat = CatParams
	v.grad = b.trainable(pi)
	v.cached = b.trainable(pi)
	b.op(i).bytes += float64(b.prec.Params.Bytes(p.Numel))
	return y
}

func lastSegment(n string) string {
	for i := len(n) - 1; i >= 0; i-- {
		if n[i] == '.' {
			return n[i+1:]
		}
	}
	return n
}

// linear lowers nn.Linear (aten::addmm / mm): saves its input when the
// weight needs a gradient, and the weight when the input does.
func (b *builder) linear(name, role string, x Value, in, out int64, bias bool) Value {
	if y, ok := b.quantLinear(name, role, x, in, out, bias); ok { // quant.go: bitsandbytes frozen weights
		return y
	}
	defer b.scope(name)()
	w := b.param("weight", []int64{out, in}, role)
	params := []int32{w}
	if bias {
		params = append(params, b.param("bias", []int64{out}, role))
	}
	dt := b.dtype(x)
	if b.prec.Autocast {
		dt = b.prec.Compute
	}
	xin := b.cast(x, dt, "autocast copy of linear input")
	wv := b.weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.addOp("matmul", "", ins, params...)
	y := b.out(i, "out", withLast(b.shape(xin), out), dt, "output of linear "+b.name(""))
	if b.trainable(w) {
		b.save(i, xin)
	}
	if b.grad(xin) {
		b.save(i, wv)
	}
	t := rows(b.shape(xin))
	b.op(i).Flops = 2 * float64(t) * float64(in) * float64(out)
	b.op(i).bytes += float64(b.val(xin).Bytes) + float64(dt.Bytes(in*out))
	if b.lora != nil && b.lora.targets(role) {
		y = b.loraAdapter(xin, y, in, out)
	}
	return y
}

// unary lowers an elementwise op. saveIn/saveOut follow derivatives.yaml
// (gelu and silu save self, relu and sigmoid save result).
func (b *builder) unary(kind string, x Value, saveIn, saveOut bool) Value {
	i := b.addOp(kind, kind, []Value{x})
	y := b.out(i, kind, b.shape(x), b.dtype(x), "output of "+kind)
	if saveIn {
		b.save(i, x)
	}
	if saveOut {
		b.save(i, y)
	}
	b.op(i).Flops = 8 * float64(numel(b.shape(x)))
	b.op(i).bytes += float64(b.val(x).Bytes)
	return y
}

// add lowers x + y (saves nothing).
func (b *builder) add(name string, x, y Value) Value {
	i := b.addOp("add", name, []Value{x, y})
	out := b.out(i, name, b.shape(x), promote(b.dtype(x), b.dtype(y)), "sum "+name)
	b.op(i).Flops = float64(numel(b.shape(x)))
	b.op(i).bytes += float64(b.val(x).Bytes + b.val(y).Bytes)
	return out
}

// mul lowers x * y: each operand is saved when the other needs a gradient.
func (b *builder) mul(name string, x, y Value) Value {
	i := b.addOp("mul", name, []Value{x, y})
	shape := b.shape(x)
	if numel(b.shape(y)) > numel(shape) {
		shape = b.shape(y)
	}
	out := b.out(i, name, shape, promote(b.dtype(x), b.dtype(y)), "product "+name)
	if b.grad(x) {
		b.save(i, y)
	}
	if b.grad(y) {
		b.save(i, x)
	}
	b.op(i).Flops = float64(numel(shape))
	b.op(i).bytes += float64(b.val(x).Bytes + b.val(y).Bytes)
	return out
}

// dropout lowers native_dropout, which saves a bool mask (the CUDA kernel).
// p = 0 or eval mode adds nothing.
func (b *builder) dropout(name string, x Value, p float64) Value {
	if p <= 0 || b.eval {
		return x
	}
	i := b.addOp("dropout", name, []Value{x})
	y := b.out(i, name, b.shape(x), b.dtype(x), "dropout output")
	m := b.out(i, name+".mask", b.shape(x), units.BOOL, "dropout mask (bool, saved for backward)")
	b.val(m).grad = false
	b.save(i, m)
	b.op(i).bytes += float64(b.val(x).Bytes)
	return y
}

// layerNorm lowers aten::native_layer_norm. Under autocast it is on the fp32
// list: the input is cast to fp32 and the output is fp32. It saves the input,
// mean and rstd (one per row).
func (b *builder) layerNorm(name string, x Value, dim int64, bias bool) Value {
	defer b.scope(name)()
	w := b.param("weight", []int64{dim}, "norm")
	params := []int32{w}
	if bias {
		params = append(params, b.param("bias", []int64{dim}, "norm"))
	}
	xin := x
	if b.prec.Autocast {
		xin = b.cast(x, units.FP32, "autocast fp32 copy of layer_norm input")
	}
	i := b.addOp("layer_norm", "", []Value{xin}, params...)
	y := b.out(i, "out", b.shape(xin), b.dtype(xin), "layer_norm output")
	statsDT := b.dtype(xin)
	if b.rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	r := rows(b.shape(xin))
	mean := b.out(i, "mean", []int64{r, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.out(i, "rstd", []int64{r, 1}, statsDT, "layer_norm rstd (saved)")
	b.val(mean).grad, b.val(rstd).grad = false, false
	b.save(i, xin, mean, rstd)
	b.op(i).Flops = 8 * float64(numel(b.shape(xin)))
	b.op(i).bytes += float64(b.val(xin).Bytes)
	return y
}

// rmsNorm lowers the Hugging Face RMSNorm (LlamaRMSNorm): x.to(fp32),
// pow(2).mean(-1), rsqrt, multiply, cast back, times weight. Saved storages
// as measured by the oracle (REPORT.md section 4).
func (b *builder) rmsNorm(name string, x Value, dim int64) Value {
	defer b.scope(name)()
	w := b.param("weight", []int64{dim}, "norm")
	inDT := b.dtype(x)
	x32 := b.cast(x, units.FP32, "fp32 copy of rms_norm input")
	r := rows(b.shape(x32))
	// pow(2): saves self.
	ip := b.addOp("pow", "pow", []Value{x32})
	sq := b.out(ip, "x2", b.shape(x32), units.FP32, "x² in rms_norm")
	b.save(ip, x32)
	// mean(-1): torch 1.13 keeps its input.
	im := b.addOp("mean", "mean", []Value{sq})
	variance := b.out(im, "variance", []int64{r, 1}, units.FP32, "rms_norm variance")
	if b.rt.RMSNormSavesSquare {
		b.save(im, sq)
	}
	// rsqrt(variance + eps): saves its result.
	ir := b.addOp("rsqrt", "rsqrt", []Value{variance})
	rs := b.out(ir, "rsqrt", []int64{r, 1}, units.FP32, "rms_norm rsqrt (saved)")
	b.save(ir, rs)
	n32 := b.mul("normalized", x32, rs)
	n := b.cast(n32, inDT, "rms_norm normalized, cast back to input dtype")
	// weight * n: saves n for the weight's grad.
	iw := b.addOp("mul", "scale", []Value{n}, w)
	outDT := promote(b.prec.Params, b.dtype(n))
	y := b.out(iw, "out", b.shape(n), outDT, "rms_norm output")
	if b.trainable(w) {
		b.save(iw, n)
	}
	for _, i := range []int32{ip, im, ir, iw} {
		b.op(i).Flops = float64(numel(b.shape(x32)))
	}
	return y
}

// ew adds an op with one output of the given shape and dtype that saves
// nothing (elementwise arithmetic, copies, concatenations).
func (b *builder) ew(kind, name string, ins []Value, shape []int64, dt units.DType, why string) Value {
	i := b.addOp(kind, name, ins)
	y := b.out(i, name, shape, dt, why)
	b.op(i).Flops = float64(numel(shape))
	for _, v := range ins {
		b.op(i).bytes += float64(b.val(v).Bytes)
	}
	return y
}

// keepAlive marks values as used until this point: a Python local (or a
// list) keeps a tensor alive until the function returns, after its last
// use by an op. It allocates nothing and has no backward.
func (b *builder) keepAlive(name string, vs ...Value) {
	var ins []Value
	for _, v := range vs {
		if v != NoValue {
			ins = append(ins, v)
		}
	}
	if len(ins) > 0 {
		b.addOp("keep_alive", name, ins)
	}
}

// productFits reports whether the product of the positive factors fits in
// an int64 (sizes in bytes of the largest tensors a plan would make).
func productFits(factors ...int64) bool {
	p := int64(1)
	for _, f := range factors {
		if f <= 0 {
			return false
		}
		if p > math.MaxInt64/f {
			return false
		}
		p *= f
	}
	return true
}
