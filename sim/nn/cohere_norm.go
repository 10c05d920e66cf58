package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// CohereNorm is Cohere's LayerNorm (Cohere2LayerNorm in transformers'
// models/cohere2/modeling_cohere2.py, 5.25.0): a weight, no bias, computed
// in fp32 from PyTorch ops rather than aten::native_layer_norm,
//
//	x32 = x.to(float32); m = x32.mean(-1)
//	y = (x32 - m) * rsqrt((x32 - m).pow(2).mean(-1) + eps)
//	return (weight.to(float32) * y).to(x.dtype)
//
// so it keeps two fp32 copies of the centred rows (x32 - m is computed
// twice: pow's operand and the product's), the fp32 rsqrt, the fp32 normalised rows y (the weight's product) and,
// in a 16-bit model, the weight's fp32 copy.
type CohereNorm struct {
	Name string
	Dim  int64
}

func (n *CohereNorm) Kind() string               { return "cohere_norm" }
func (n *CohereNorm) Label() string              { return n.Name }
func (n *CohereNorm) DefaultName() string        { return "norm" }
func (n *CohereNorm) Children() []core.Layer     { return nil }
func (n *CohereNorm) InDim() int64               { return n.Dim }
func (n *CohereNorm) OutDim() int64              { return n.Dim }
func (n *CohereNorm) Params() int64              { return n.Dim }
func (n *CohereNorm) Summary() string            { return fmt.Sprintf("%d", n.Dim) }
func (n *CohereNorm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }
func (n *CohereNorm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "cohere_norm", n.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(n))()
	return cohereNorm(b, x, []int64{n.Dim}, n.Dim)
}

// cohereNorm lowers Cohere's LayerNorm over the last dim of x, in the
// current scope, its weight of the given shape: [dim], or [heads, dim]
// for Command R+'s q_norm and k_norm (CohereLayerNorm(hidden_size=
// (num_heads, head_dim)) over q viewed as [..., heads, head_dim]: a
// weight for each head, Attention.QKNormCohere).
func cohereNorm(b *core.Builder, x core.Value, weight []int64, dim int64) core.Value {
	const norm = "Cohere's LayerNorm"
	w := b.Param("weight", weight, core.RoleNorm)
	x32 := b.Cast(x, units.FP32, "fp32 copy of the input of "+norm)
	shape := b.Shape(x32)
	rows := []int64{core.Numel(shape) / dim, 1}
	mean := b.Ew("mean", "mean", []core.Value{x32}, rows, units.FP32, "mean of x in "+norm)
	// x - mean twice: once for the variance (pow saves it), once for the
	// normalised rows (the product saves it)
	d := b.Ew("sub", "centered", []core.Value{x32, mean}, shape, units.FP32, "x - mean for the variance in "+norm)
	ms, _, _ := meanSquareFP32(b, d, dim, norm)
	d = b.Ew("sub", "centered_again", []core.Value{x32, mean}, shape, units.FP32, "x - mean for the normalised rows in "+norm)
	ir := b.AddOp("rsqrt", "rsqrt", []core.Value{ms})
	rs := b.Out(ir, "rsqrt", rows, units.FP32, "rsqrt(variance + eps), saved by rsqrt")
	b.Save(ir, rs)
	b.Op(ir).Flops = float64(rows[0])
	y := b.Mul("normalized", d, rs)
	out := fp32WeightProduct(b, w, y, core.Numel(weight), "the fp32 weight times the normalised rows")
	return b.Cast(out, b.Dtype(x), norm+"'s output cast back")
}
