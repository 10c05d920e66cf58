package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// GatedNorm is A.X-K2's gated RMSNorm (AXK2GatedRMSNorm,
// models/axk2/modular_axk2.py at 5.25.0; Megatron's GatedNormWrapper):
//
//	y = norm(x)                                   # Llama's RMSNorm
//	(y * sigmoid(mlp.fc2(silu(mlp.fc1(y))).float())).to(y.dtype)
//
// a low-rank (Rank: gated_norm_rank) gate of each channel from the
// normed rows. fc1 saves y, silu its input, fc2 silu's output, sigmoid
// its fp32 output, the product y and the sigmoid (an fp32 product, cast
// back where the model is not fp32, a copy the next layer reads).
type GatedNorm struct {
	Name string
	Dim  int64
	Rank int64
}

func (n *GatedNorm) Kind() string           { return "gated_norm" }
func (n *GatedNorm) Label() string          { return n.Name }
func (n *GatedNorm) DefaultName() string    { return "norm" }
func (n *GatedNorm) Children() []core.Layer { return nil }
func (n *GatedNorm) InDim() int64           { return n.Dim }
func (n *GatedNorm) OutDim() int64          { return n.Dim }

// Params: norm's weight and the gate's fc1 and fc2 (no biases).
func (n *GatedNorm) Params() int64 { return n.Dim + 2*n.Dim*n.Rank }

func (n *GatedNorm) Summary() string { return fmt.Sprintf("%d, gate rank %d", n.Dim, n.Rank) }

func (n *GatedNorm) Validate(path string) error {
	if err := core.Positive(path, "dim", n.Dim); err != nil {
		return err
	}
	return core.Positive(path, "gate rank", n.Rank)
}

func (n *GatedNorm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "gated_norm", n.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(n))()
	y := b.RmsNorm("norm", x, n.Dim)
	dt := b.Dtype(y)
	g := func() core.Value {
		defer b.Scope("mlp")()
		h := b.Linear("fc1", core.RoleLinear, y, n.Dim, n.Rank, false)
		h = b.Unary("silu", h, true, false)
		return b.Linear("fc2", core.RoleLinear, h, n.Rank, n.Dim, false)
	}()
	if b.Dtype(g) != units.FP32 {
		g = b.Cast(g, units.FP32, "the gate's logits .float()")
	}
	i := b.AddOp("sigmoid", "gate", []core.Value{g})
	sg := b.Out(i, "gate_sigmoid", b.Shape(g), units.FP32, "sigmoid of the gate (fp32), saved by sigmoid and the product")
	b.Save(i, sg)
	b.Op(i).Flops = 4 * float64(core.Numel(b.Shape(g)))
	out := b.Mul("gated", y, sg)
	if dt != units.FP32 {
		out = b.Cast(out, dt, "the gated rows cast back to the norm's dtype")
	}
	return out
}
