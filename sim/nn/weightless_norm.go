package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// WeightlessRMSNorm is an RMSNorm without a weight run in fp32, as
// Llama4TextWeightlessRMSNorm (models/llama4/modeling_llama4.py at
// transformers 5.25.0) and NanoChat's NanoChatRMSNorm, which is it
// (models/nanochat/modular_nanochat.py), compute it:
//
//	x32 = x.float(); y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps); y.type_as(x)
//
// It keeps the fp32 rows (the input itself in an fp32 model) and the fp32
// rsqrt of each row (weightlessRMS). It holds no parameter: a model may
// call one module twice (NanoChatModel's norm, before and after the
// layers).
type WeightlessRMSNorm struct {
	Name string
	Dim  int64
}

func (n *WeightlessRMSNorm) Kind() string               { return "weightless_rmsnorm" }
func (n *WeightlessRMSNorm) Label() string              { return n.Name }
func (n *WeightlessRMSNorm) DefaultName() string        { return "norm" }
func (n *WeightlessRMSNorm) Children() []core.Layer     { return nil }
func (n *WeightlessRMSNorm) InDim() int64               { return n.Dim }
func (n *WeightlessRMSNorm) OutDim() int64              { return n.Dim }
func (n *WeightlessRMSNorm) Params() int64              { return 0 }
func (n *WeightlessRMSNorm) Summary() string            { return fmt.Sprintf("%d, no weight", n.Dim) }
func (n *WeightlessRMSNorm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }
func (n *WeightlessRMSNorm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "weightless_rmsnorm", n.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(n))()
	return weightlessRMS(b, "hidden_states", x)
}
