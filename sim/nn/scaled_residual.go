package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// ScaledResidual is x * Alpha + Layer(x) * Beta: MiniMax's residual
// connections (MiniMaxDecoderLayer.forward, models/minimax/
// modeling_minimax.py at 5.25.0), whose x is the output of the norm
// before the layer, not the block's input (the norm's output is the
// residual), and whose factors are config.json's
// full_attn_alpha_factor and _beta_factor, linear_attn_alpha_factor and
// _beta_factor, mlp_alpha_factor and _beta_factor. Each factor is a
// Python float: the two products are new tensors (even at 1) and save
// nothing, nor does the sum.
type ScaledResidual struct {
	Layer       core.Layer
	Alpha, Beta float64
}

func (r *ScaledResidual) Kind() string           { return "scaled_residual" }
func (r *ScaledResidual) Label() string          { return "" }
func (r *ScaledResidual) DefaultName() string    { return "" } // runs in the decoder layer's module
func (r *ScaledResidual) Children() []core.Layer { return []core.Layer{r.Layer} }
func (r *ScaledResidual) Params() int64          { return r.Layer.Params() }
func (r *ScaledResidual) Summary() string {
	return fmt.Sprintf("x %g + %s(x) %g", r.Alpha, r.Layer.Kind(), r.Beta)
}
func (r *ScaledResidual) Validate(path string) error {
	return r.Layer.Validate(core.ChildPath(path, r, r.Layer))
}

func (r *ScaledResidual) Lower(b *core.Builder, x core.Value) core.Value {
	y := b.LowerChild(r.Layer, x)
	if b.Last(y) != b.Last(x) {
		panic(core.ShapeMismatch(b, "scaled_residual", b.Last(x), b.Last(y)))
	}
	xa := b.Ew("mul", "residual_alpha", []core.Value{x}, b.Shape(x), b.Dtype(x), "residual * alpha (a Python float: nothing saved)")
	yb := b.Ew("mul", "out_beta", []core.Value{y}, b.Shape(y), b.Dtype(y), "the layer's output * beta (a Python float: nothing saved)")
	return b.Add("residual", xa, yb)
}
