package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// OlmoNorm is OLMo's OlmoLayerNorm (models/olmo/modeling_olmo.py at
// 5.25.0): a LayerNorm without weight or bias, run in fp32,
//
//	F.layer_norm(x.to(float32), (dim,), None, None, eps=1e-5).to(x.dtype)
//
// so a 16-bit model keeps the fp32 copy of its input, the fp32 mean and
// rstd, and casts the fp32 output back; an fp32 model keeps its input.
type OlmoNorm struct {
	Name string
	Dim  int64
}

func (n *OlmoNorm) Kind() string               { return "olmo_norm" }
func (n *OlmoNorm) Label() string              { return n.Name }
func (n *OlmoNorm) DefaultName() string        { return "norm" }
func (n *OlmoNorm) Children() []core.Layer     { return nil }
func (n *OlmoNorm) InDim() int64               { return n.Dim }
func (n *OlmoNorm) OutDim() int64              { return n.Dim }
func (n *OlmoNorm) Params() int64              { return 0 }
func (n *OlmoNorm) Summary() string            { return fmt.Sprintf("%d, no weight", n.Dim) }
func (n *OlmoNorm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }
func (n *OlmoNorm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "olmo_norm", n.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(n))()
	x32 := b.Cast(x, units.FP32, "fp32 copy of the input of OLMo's LayerNorm")
	return b.Cast(b.WeightlessLayerNorm(x32), b.Dtype(x), "OLMo's LayerNorm output cast back")
}
