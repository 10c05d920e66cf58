package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Olmo2Norm is OLMo 2's RMSNorm (Olmo2RMSNorm in transformers'
// models/olmo2/modeling_olmo2.py, 5.25.0), which differs from Llama's in
// that the weight multiplies the fp32 normalised rows before the cast back,
//
//	x32 = x.to(float32); y = x32 * rsqrt(x32.pow(2).mean(-1) + eps)
//	return (weight * y).to(x.dtype)
//
// so in a 16-bit model the weight's product keeps y in fp32 (Llama's keeps
// its 16-bit copy). In fp32 the two keep the same tensors.
type Olmo2Norm struct {
	Name string
	Dim  int64
}

func (n *Olmo2Norm) Kind() string               { return "olmo2_norm" }
func (n *Olmo2Norm) Label() string              { return n.Name }
func (n *Olmo2Norm) DefaultName() string        { return "norm" }
func (n *Olmo2Norm) Children() []core.Layer     { return nil }
func (n *Olmo2Norm) InDim() int64               { return n.Dim }
func (n *Olmo2Norm) OutDim() int64              { return n.Dim }
func (n *Olmo2Norm) Params() int64              { return n.Dim }
func (n *Olmo2Norm) Summary() string            { return fmt.Sprintf("%d", n.Dim) }
func (n *Olmo2Norm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }

func (n *Olmo2Norm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "olmo2_norm", n.Dim, b.Last(x)))
	}
	return olmo2Norm(b, b.ModuleName(n), x, n.Dim)
}

// olmo2Norm lowers Olmo2RMSNorm over the last dim features of x.
func olmo2Norm(b *core.Builder, name string, x core.Value, dim int64) core.Value {
	return fp32RMSNorm(b, name, x, dim, normWeightAsIs, "OLMo 2's RMSNorm")
}

// normWeight is what an fp32 RMSNorm multiplies its rows by.
type normWeight int

const (
	normWeightAsIs    normWeight = iota // the weight itself (OLMo 2)
	normWeightOnePlus                   // 1.0 + weight.float(), a new fp32 vector (Gemma 3)
	normWeightFloat                     // weight.to(torch.float32), an fp32 copy in a 16-bit model (Nemotron-H)
)

// fp32RMSNorm is an RMSNorm computed in fp32 whose weight multiplies the
// normalised rows before the cast back to x's dtype:
//
//	x32 = x.float(); y = x32 * rsqrt(x32.pow(2).mean(-1) + eps)
//	return (y * w).type_as(x)
//
// w as weight says. pow(2) saves x32, rsqrt its result, x32 * rsqrt both
// operands, and the weight's product the fp32 rows y (and an fp32 vector
// made from the weight, its operand).
func fp32RMSNorm(b *core.Builder, name string, x core.Value, dim int64, weight normWeight, norm string) core.Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, core.RoleNorm)
	x32 := b.Cast(x, units.FP32, "fp32 copy of the input of "+norm)
	return fp32RMSNormOf(b, w, x32, dim, weight, norm, b.Dtype(x))
}

// fp32RMSNormOf is fp32RMSNorm past its fp32 copy x32 of the input, with
// the weight w, cast back to dt.
func fp32RMSNormOf(b *core.Builder, w int32, x32 core.Value, dim int64, weight normWeight, norm string, dt units.DType) core.Value {
	shape := b.Shape(x32)
	ms, ip, im := meanSquareFP32(b, x32, dim, norm)
	ir := b.AddOp("rsqrt", "rsqrt", []core.Value{ms})
	rs := b.Out(ir, "rsqrt", []int64{core.Numel(shape) / dim, 1}, units.FP32, "rsqrt(mean of x² + eps), saved by rsqrt")
	b.Save(ir, rs)
	y := b.Mul("normalized", x32, rs)
	for _, i := range []int32{ip, im, ir} {
		b.Op(i).Flops = float64(core.Numel(shape))
	}
	if weight == normWeightFloat && b.P.Params[w].Stored(b.Prec) == units.FP32 {
		weight = normWeightAsIs // weight.to(torch.float32) is the weight itself
	}
	var out core.Value
	switch weight {
	case normWeightOnePlus:
		iw := b.AddOp("add", "one_plus_weight", nil, w)
		w1 := b.Out(iw, "one_plus_weight", []int64{dim}, units.FP32, "1 + weight.float() (fp32)")
		out = b.Mul("scaled", y, w1)
	case normWeightFloat:
		iw := b.AddOp("cast", "weight_fp32", nil, w)
		wf := b.Out(iw, "weight_fp32", []int64{dim}, units.FP32, "weight.to(torch.float32) (an fp32 copy)")
		out = b.Mul("scaled", wf, y)
	default:
		iw := b.AddOp("mul", "scale", []core.Value{y}, w)
		out = b.Out(iw, "scaled", shape, units.FP32, "the weight times the normalised rows, in fp32")
		if b.Trainable(w) {
			b.Save(iw, y)
		}
		b.Op(iw).Flops = float64(core.Numel(shape))
	}
	return b.Cast(out, dt, norm+"'s output cast back (type_as)")
}

// wideQKNorm is OLMo 2's q_norm and k_norm (Attention.QKNormWide):
// Olmo2RMSNorm over each projection's whole width (all its heads at
// once), before the heads are split; with QKNormWideLlama, Llama's
// RMSNorm over the same widths (InternVLVisionAttention's q_norm and
// k_norm, modeling_internvl.py, transformers 5.25.0).
func (a *Attention) wideQKNorm(b *core.Builder, q, k core.Value, h, kv, d int64) (core.Value, core.Value) {
	if a.QKNormWideLlama {
		return b.RmsNorm("q_norm", q, h*d), b.RmsNorm("k_norm", k, kv*d)
	}
	return olmo2Norm(b, "q_norm", q, h*d), olmo2Norm(b, "k_norm", k, kv*d)
}

// wideQKNormError: a norm over the whole projection needs every head's
// sum of squares, which tensor parallelism splits (an all-reduce memsh
// does not model; Attention.layoutRefusal).
func wideQKNormError(path string, tp int64) error {
	return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d: q_norm and k_norm over all the heads (OLMo 2, OLMoE) are not modelled under tensor parallelism", tp),
		Hint: "use tp=1 (dp, fsdp or zero)"}
}
