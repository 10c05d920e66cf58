package core

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
func (b *Builder) Weight(pi int32, dt units.DType) Value {
	p := b.P.Params[pi]
	if !b.Prec.Autocast || b.Prec.Params == dt {
		return NoValue
	}
	if y, ok := b.castCache[castKey{pi, dt}]; ok {
		return y // autocast's cache: the copy an earlier call of the module made
	}
	i := b.AddOp("cast", "to_"+dt.Name(), nil, pi)
	y := b.Out(i, lastSegment(p.Name)+"."+dt.Name(), p.Shape, dt, "autocast "+dt.Name()+" copy of weight "+p.Name)
	v := b.Val(y)
	v.Cat = CatParams
	v.Grad = b.Trainable(pi)
	v.Cached = b.Trainable(pi) || b.refCopy // autocast caches a leaf requiring grad: DPO's reference copy's too
	b.Op(i).Bytes += float64(b.Prec.Params.Bytes(p.Numel))
	if v.Cached && b.castCache != nil {
		b.castCache[castKey{pi, dt}] = y
	}
	return y
}

// castKey names one of autocast's cached weight casts (Builder.castCache).
type castKey struct {
	param int32
	dt    units.DType
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
func (b *Builder) Linear(name string, role Role, x Value, in, out int64, bias bool) Value {
	if b.quantizes(role) {
		b.refuseQuantParamTarget(name) // PEFT's ParamWrapper on a quantized weight (lora_param_linear.go)
	}
	if y, ok := b.qatLinear(name, role, x, in, out, bias); ok { // torchao's fake-quantized linear (QAT)
		return y
	}
	if y, ok := b.quantLinear(name, role, x, in, out, bias); ok { // bitsandbytes frozen weights
		return y
	}
	if y, ok := b.float8Linear(name, role, x, in, out, bias); ok { // torchao's Float8Linear
		return y
	}
	if b.teConverts(role) { // Transformer Engine's fp8 linear (te_fp8.go)
		return b.teLinear(name, role, x, in, out, 0, 0, bias)
	}
	defer b.Scope(name)()
	w := b.Param("weight", []int64{out, in}, role)
	params := []int32{w}
	if bias {
		params = append(params, b.Param("bias", []int64{out}, role))
	}
	if y := b.paramWrappedLinear(w, role, params, x, in, out); y != NoValue {
		return y // PEFT's ParamWrapper on the weight (lora_param_linear.go)
	}
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of linear input")
	wv := b.Weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, params...)
	b.Op(i).TEGemm = b.teGemm(role) // Megatron-Core's TE layers (megatron_te.go)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), dt, b.Concat("output of linear ", b.Name("")))
	if b.Trainable(w) || (isConv(role) && b.Grad(xin)) {
		// a convolution keeps its input whenever it has a backward:
		// convolution_backward is one formula for the input's, the
		// weight's and the bias's gradients (derivatives.yaml), so
		// autograd saves input and weight together, a frozen weight's too
		b.Save(i, xin)
	}
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	t := Rows(b.Shape(xin))
	b.Op(i).Flops = 2 * float64(t) * float64(in) * float64(out)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(in*out))
	if b.adapts(role) {
		y = b.loraAdapter(x, y, in, out) // x, not xin: lora_A casts its own copy (loraAdapter)
	}
	return y
}

// isConv reports whether role is a convolution lowered as the matmul it
// is (RoleConv, RoleConvLeaf).
func isConv(role Role) bool { return role == RoleConv || role == RoleConvLeaf }

// unary lowers an elementwise op. saveIn/saveOut follow derivatives.yaml
// (gelu and silu save self, relu and sigmoid save result).
func (b *Builder) Unary(kind string, x Value, saveIn, saveOut bool) Value {
	return b.unary(kind, kind, x, saveIn, saveOut)
}

// unary is Unary with an op and output called name.
func (b *Builder) unary(kind, name string, x Value, saveIn, saveOut bool) Value {
	i := b.AddOp(kind, name, []Value{x})
	y := b.Out(i, name, b.Shape(x), b.Dtype(x), "output of "+kind)
	if saveIn {
		b.Save(i, x)
	}
	if saveOut {
		b.Save(i, y)
	}
	b.Op(i).Flops = 8 * float64(Numel(b.Shape(x)))
	b.Op(i).Bytes += float64(b.Val(x).Bytes)
	return y
}

// add lowers x + y (saves nothing).
func (b *Builder) Add(name string, x, y Value) Value {
	i := b.AddOp("add", name, []Value{x, y})
	out := b.Out(i, name, b.Shape(x), Promote(b.Dtype(x), b.Dtype(y)), b.Concat("sum ", name))
	b.Op(i).Flops = float64(Numel(b.Shape(x)))
	b.Op(i).Bytes += float64(b.Val(x).Bytes + b.Val(y).Bytes)
	return out
}

// mul lowers x * y: each operand is saved when the other needs a gradient.
func (b *Builder) Mul(name string, x, y Value) Value {
	i := b.AddOp("mul", name, []Value{x, y})
	shape := b.Shape(x)
	if Numel(b.Shape(y)) > Numel(shape) {
		shape = b.Shape(y)
	}
	out := b.Out(i, name, shape, Promote(b.Dtype(x), b.Dtype(y)), "product "+name)
	if b.Grad(x) {
		b.Save(i, y)
	}
	if b.Grad(y) {
		b.Save(i, x)
	}
	b.Op(i).Flops = float64(Numel(shape))
	b.Op(i).Bytes += float64(b.Val(x).Bytes + b.Val(y).Bytes)
	return out
}

// dropout lowers native_dropout, which saves a bool mask (the CUDA kernel).
// p = 0 or eval mode adds nothing.
func (b *Builder) Dropout(name string, x Value, p float64) Value {
	return b.DropoutOf(name, x, b.Shape(x), p)
}

// DropoutOf is Dropout on the part of x of the given shape that a strided
// view selects (RoBERTa's classification head drops out
// hidden_states[:, 0]): it reads that part and writes a new tensor and
// mask of that shape.
func (b *Builder) DropoutOf(name string, x Value, shape []int64, p float64) Value {
	if p <= 0 || b.Eval {
		return x
	}
	i := b.AddOp("dropout", name, []Value{x})
	y := b.Out(i, name, shape, b.Dtype(x), "dropout output")
	m := b.Out(i, name+".mask", shape, units.BOOL, "dropout mask (bool, saved for backward)")
	b.Val(m).Grad = false
	b.Save(i, m)
	b.Op(i).Bytes += float64(b.Dtype(x).Bytes(Numel(shape)))
	return y
}

// layerNorm lowers aten::native_layer_norm. Under autocast it is on the fp32
// list: the input is cast to fp32 and the output is fp32. It saves the input,
// mean and rstd (one per row).
func (b *Builder) LayerNorm(name string, x Value, dim int64, bias bool) Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, RoleNorm)
	params := []int32{w}
	if bias {
		params = append(params, b.Param("bias", []int64{dim}, RoleNorm))
	}
	return b.layerNorm(x, params)
}

// WeightlessLayerNorm is F.layer_norm(x, (dim,), None, None) in the
// current scope: no weight, no bias (OLMo's OlmoLayerNorm; the same
// saves: x, mean and rstd).
func (b *Builder) WeightlessLayerNorm(x Value) Value { return b.layerNorm(x, nil) }

func (b *Builder) layerNorm(x Value, params []int32) Value {
	xin := x
	if b.Prec.Autocast {
		xin = b.Cast(x, units.FP32, "autocast fp32 copy of layer_norm input")
	}
	i := b.AddOp("layer_norm", "", []Value{xin}, params...)
	y := b.Out(i, "out", b.Shape(xin), b.Dtype(xin), "layer_norm output")
	statsDT := b.Dtype(xin)
	if b.Rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	r := Rows(b.Shape(xin))
	mean := b.Out(i, "mean", []int64{r, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.Out(i, "rstd", []int64{r, 1}, statsDT, "layer_norm rstd (saved)")
	b.Val(mean).Grad, b.Val(rstd).Grad = false, false
	b.Save(i, xin, mean, rstd)
	b.Op(i).Flops = 8 * float64(Numel(b.Shape(xin)))
	b.Op(i).Bytes += float64(b.Val(xin).Bytes)
	return y
}

// rmsNorm lowers the Hugging Face RMSNorm (LlamaRMSNorm): x.to(fp32),
// pow(2).mean(-1), rsqrt, multiply, cast back, times weight. Saved storages
// as measured by the oracle (REPORT.md section 4).
func (b *Builder) RmsNorm(name string, x Value, dim int64) Value {
	return b.rmsNorm(name, x, dim, false)
}

// RmsNormSlice is RmsNorm over the first dim features of x's last
// dimension, a split view of x (MLA's kv_a_layernorm reads the latent
// part of kv_a_proj's output): the fp32 copy reads the slice.
func (b *Builder) RmsNormSlice(name string, x Value, dim int64) Value {
	return b.rmsNorm(name, x, dim, b.Last(x) != dim)
}

func (b *Builder) rmsNorm(name string, x Value, dim int64, slice bool) Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, RoleNorm)
	if b.ligerKernels() && !slice {
		return b.ligerRMSNorm(x, w)
	}
	if b.MegatronKernels() && !slice {
		return b.teRMSNorm(x, w)
	}
	n := b.rmsNormalize(x, dim, slice)
	// weight * n: saves n for the weight's grad.
	iw := b.AddOp("mul", "scale", []Value{n}, w)
	outDT := Promote(b.Prec.NormDType(), b.Dtype(n))
	y := b.Out(iw, "out", b.Shape(n), outDT, "rms_norm output")
	if b.Trainable(w) {
		b.Save(iw, n)
	}
	b.Op(iw).Flops = float64(Numel(b.Shape(n)))
	return y
}

// WeightlessRmsNormSlice is an RMS norm without a weight over the first
// dim features of x's last dimension (x itself when dim is its width):
// x.float() * rsqrt(x.float().pow(2).mean(-1) + eps), cast back to x's
// dtype (FalconMambaWeightlessRMSNorm at transformers 5.25.0, the dt, B
// and C norms of FalconMambaMixer). Saved as RmsNormSlice saves them but
// the weight's product.
func (b *Builder) WeightlessRmsNormSlice(name string, x Value, dim int64) Value {
	defer b.Scope(name)()
	return b.rmsNormalize(x, dim, b.Last(x) != dim)
}

// rmsNormalize is an RMS norm's x.to(fp32), pow(2).mean(-1), rsqrt and
// product, cast back to x's dtype.
func (b *Builder) rmsNormalize(x Value, dim int64, slice bool) Value {
	inDT := b.Dtype(x)
	shape := WithLast(b.Shape(x), dim)
	var x32 Value
	switch {
	case slice && inDT == units.FP32:
		// .to(float32) of an fp32 slice is the slice itself, a view:
		// pow and the product save x's whole storage.
		x32 = x
	case slice:
		c := b.AddOp("cast", "to_fp32", []Value{x})
		x32 = b.Out(c, "slice.fp32", shape, units.FP32, "fp32 copy of the normalised slice")
	default:
		x32 = b.Cast(x, units.FP32, "fp32 copy of rms_norm input")
	}
	r := Rows(shape)
	// pow(2): saves self; its kernel reads x32 and writes x².
	ip := b.AddOp("pow", "pow", []Value{x32})
	sq := b.Out(ip, "x2", shape, units.FP32, "x² in rms_norm")
	b.Op(ip).Bytes += float64(units.FP32.Bytes(Numel(shape)))
	b.Save(ip, x32)
	// mean(-1): torch 1.13 keeps its input.
	im := b.AddOp("mean", "mean", []Value{sq})
	variance := b.Out(im, "variance", []int64{r, 1}, units.FP32, "rms_norm variance")
	if b.Rt.RMSNormSavesSquare {
		b.Save(im, sq)
	}
	// rsqrt(variance + eps): saves its result.
	ir := b.AddOp("rsqrt", "rsqrt", []Value{variance})
	rs := b.Out(ir, "rsqrt", []int64{r, 1}, units.FP32, "rms_norm rsqrt (saved)")
	b.Save(ir, rs)
	in := b.AddOp("mul", "normalized", []Value{x32, rs})
	n32 := b.Out(in, "normalized", shape, units.FP32, "product normalized")
	if b.Grad(x32) {
		b.Save(in, rs)
	}
	if b.Grad(rs) {
		b.Save(in, x32)
	}
	b.Op(in).Flops = float64(Numel(shape))
	b.Op(in).Bytes += float64(units.FP32.Bytes(Numel(shape)) + b.Val(rs).Bytes)
	for _, i := range []int32{ip, im, ir} {
		b.Op(i).Flops = float64(Numel(shape))
	}
	return b.Cast(n32, inDT, "rms_norm normalized, cast back to input dtype")
}

// ew adds an op with one output of the given shape and dtype that saves
// nothing (elementwise arithmetic, copies, concatenations).
func (b *Builder) Ew(kind, name string, ins []Value, shape []int64, dt units.DType, why string) Value {
	i := b.AddOp(kind, name, ins)
	y := b.Out(i, name, shape, dt, why)
	b.Op(i).Flops = float64(Numel(shape))
	for _, v := range ins {
		b.Op(i).Bytes += float64(b.Val(v).Bytes)
	}
	return y
}

// keepAlive marks values as used until this point: a Python local (or a
// list) keeps a tensor alive until the function returns, after its last
// use by an op. It allocates nothing and has no backward.
func (b *Builder) KeepAlive(name string, vs ...Value) {
	var ins []Value
	for _, v := range vs {
		if v != NoValue {
			ins = append(ins, v)
		}
	}
	if len(ins) > 0 {
		b.AddOp("keep_alive", name, ins)
	}
}

// productFits reports whether the product of the positive factors fits in
// an int64 (sizes in bytes of the largest tensors a plan would make).
func ProductFits(factors ...int64) bool {
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
