package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gemma4Norm is Gemma 4's RMSNorm (Gemma4RMSNorm in transformers'
// models/gemma4/modeling_gemma4.py, 5.17.0), which differs from Llama's in
// what autograd keeps: the whole computation runs in fp32 and the weight
// multiplies before the cast back,
//
//	x32 = x.float(); r = (x32.pow(2).mean(-1) + eps).pow(-0.5)
//	y = (x32 * r * weight.float()).type_as(x)
//
// so pow(2) saves x32, pow(-0.5) its input (one fp32 value a row), the
// product x32 * r both operands, and the weight's product the fp32
// normalised rows and weight.float() (a fresh fp32 copy when the
// parameters are not fp32). NoScale is the norm without a weight
// (with_scale=False: v_norm, the router's norm).
type Gemma4Norm struct {
	Name    string
	Dim     int64
	NoScale bool
}

func (n *Gemma4Norm) Kind() string           { return "gemma4_norm" }
func (n *Gemma4Norm) Label() string          { return n.Name }
func (n *Gemma4Norm) DefaultName() string    { return "norm" }
func (n *Gemma4Norm) Children() []core.Layer { return nil }
func (n *Gemma4Norm) InDim() int64           { return n.Dim }
func (n *Gemma4Norm) OutDim() int64          { return n.Dim }
func (n *Gemma4Norm) Params() int64 {
	if n.NoScale {
		return 0
	}
	return n.Dim
}
func (n *Gemma4Norm) Summary() string {
	if n.NoScale {
		return fmt.Sprintf("%d, no weight", n.Dim)
	}
	return fmt.Sprintf("%d", n.Dim)
}
func (n *Gemma4Norm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }

func (n *Gemma4Norm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "gemma4_norm", n.Dim, b.Last(x)))
	}
	return gemma4Norm(b, b.ModuleName(n), x, n.Dim, !n.NoScale)
}

// gemma4Norm lowers Gemma4RMSNorm over the last dim features of x.
func gemma4Norm(b *core.Builder, name string, x core.Value, dim int64, scale bool) core.Value {
	defer b.Scope(name)()
	w := int32(-1)
	if scale {
		w = b.Param("weight", []int64{dim}, core.RoleNorm)
	}
	inDT := b.Dtype(x)
	x32 := b.Cast(x, units.FP32, "fp32 copy of the Gemma 4 RMSNorm input")
	shape := b.Shape(x32)
	rows := core.Numel(shape) / dim
	ms, ip, im := meanSquareFP32(b, x32, dim, "Gemma 4's RMSNorm")
	ir := b.AddOp("pow", "pow_rsqrt", []core.Value{ms})
	rs := b.Out(ir, "rsqrt", []int64{rows, 1}, units.FP32, "(mean of x² + eps)^-0.5")
	b.Save(ir, ms) // pow's backward reads its input
	y := b.Mul("normalized", x32, rs)
	if scale {
		y = fp32WeightProduct(b, w, y, dim, "Gemma 4 RMSNorm output in fp32")
	}
	for _, i := range []int32{ip, im, ir} {
		b.Op(i).Flops = float64(core.Numel(shape))
	}
	return b.Cast(y, inDT, "Gemma 4 RMSNorm output cast back (type_as)")
}

// meanSquareFP32 is x32.pow(2).mean(-1, keepdim=True) + eps over the
// last dim features of the fp32 x32, as Gemma's RMSNorms compute it (of
// norm): pow saves x32. It returns the sum and the pow and mean ops.
func meanSquareFP32(b *core.Builder, x32 core.Value, dim int64, norm string) (core.Value, int32, int32) {
	shape := b.Shape(x32)
	rows := core.Numel(shape) / dim
	ip := b.AddOp("pow", "pow", []core.Value{x32})
	sq := b.Out(ip, "x2", shape, units.FP32, "x² in "+norm)
	b.Save(ip, x32)
	im := b.AddOp("mean", "mean", []core.Value{sq})
	ms := b.Out(im, "mean_squared", []int64{rows, 1}, units.FP32, "mean of x² in "+norm)
	return b.Ew("add", "eps", []core.Value{ms}, []int64{rows, 1}, units.FP32, "mean of x² plus eps"), ip, im
}

// fp32WeightProduct is weight.float() * y for the fp32 rows y: it saves
// y (the weight's gradient) and the weight's fp32 copy when there is one
// (a 16-bit model's).
func fp32WeightProduct(b *core.Builder, w int32, y core.Value, dim int64, why string) core.Value {
	wv := gemma4WeightFP32(b, w, dim)
	ins := []core.Value{y}
	if wv != core.NoValue {
		ins = append(ins, wv)
	}
	iw := b.AddOp("mul", "scale", ins, w)
	out := b.Out(iw, "scaled", b.Shape(y), units.FP32, why)
	if wv != core.NoValue {
		b.Save(iw, wv)
	}
	if b.Trainable(w) {
		b.Save(iw, y)
	}
	b.Op(iw).Flops = float64(core.Numel(b.Shape(y)))
	return out
}

// gemma4WeightFP32 is weight.float(): a new fp32 tensor unless the
// parameters are fp32 (then the parameter itself, NoValue here).
func gemma4WeightFP32(b *core.Builder, w int32, dim int64) core.Value {
	if b.Prec.Params == units.FP32 {
		return core.NoValue
	}
	i := b.AddOp("cast", "weight_to_fp32", nil, w)
	v := b.Out(i, "weight.fp32", []int64{dim}, units.FP32, "fp32 copy of the norm weight (weight.float())")
	b.Val(v).Grad = b.Trainable(w)
	b.Op(i).Bytes += float64(b.Prec.Params.Bytes(dim))
	return v
}

// gemma4HeadNorm is gemma4Norm over each head of x viewed as [...,
// heads, headDim] (q_norm, k_norm, v_norm); the result is [...,
// heads*headDim].
func gemma4HeadNorm(b *core.Builder, name string, x core.Value, s []int64, heads, headDim int64, scale bool) core.Value {
	split := append(append([]int64(nil), s[:len(s)-1]...), heads, headDim)
	if core.Numel(split) != core.Numel(b.Shape(x)) {
		panic(core.LowerError{Err: units.Errorf(b.Name(name), "cannot view %v as %v heads of %d", b.Shape(x), heads, headDim)})
	}
	b.Val(x).Shape = split
	y := gemma4Norm(b, name, x, headDim, scale)
	b.Val(x).Shape = core.WithLast(s, heads*headDim)
	if y != x {
		b.Val(y).Shape = core.WithLast(s, heads*headDim)
	}
	return y
}
