package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// BitNetMLP is BitNet b1.58's MLP as transformers 5.25.0 builds it
// (BitNetMLP, models/bitnet/modular_bitnet.py: GemmaMLP's gate_proj,
// up_proj and down_proj without bias, and ffn_sub_norm):
//
//	down_proj(ffn_sub_norm(act(gate_proj(x)) * up_proj(x)))
//
// act is hidden_act (relu2 by default: squared ReLU), ffn_sub_norm
// Llama's RMSNorm over the Hidden intermediate features. Tensor
// parallelism is refused (in Lower; BitNet's attention, whose
// attn_sub_norm has the same problem, refuses the layout before it): the
// norm would run over a shard of them.
type BitNetMLP struct {
	Name        string
	Dim, Hidden int64
	Act         string // the gate's activation, ungated name (relu2, silu, gelu, ...)
}

func (m *BitNetMLP) Kind() string           { return "bitnet_mlp" }
func (m *BitNetMLP) Label() string          { return m.Name }
func (m *BitNetMLP) DefaultName() string    { return "mlp" }
func (m *BitNetMLP) Children() []core.Layer { return nil }
func (m *BitNetMLP) InDim() int64           { return m.Dim }
func (m *BitNetMLP) OutDim() int64          { return m.Dim }

// Params: gate, up and down, and ffn_sub_norm's weight.
func (m *BitNetMLP) Params() int64 { return 3*m.Dim*m.Hidden + m.Hidden }

func (m *BitNetMLP) Summary() string {
	return fmt.Sprintf("%d -> %d (%s gate, ffn_sub_norm) -> %d", m.Dim, m.Hidden, m.Act, m.Dim)
}

func (m *BitNetMLP) Validate(path string) error {
	if err := core.Positive(path, "dim", m.Dim); err != nil {
		return err
	}
	if err := core.Positive(path, "hidden", m.Hidden); err != nil {
		return err
	}
	return (&MLP{Dim: m.Dim, Hidden: m.Hidden, Act: m.Act}).Validate(path)
}

func (m *BitNetMLP) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "bitnet_mlp", m.Dim, b.Last(x)))
	}
	if b.Par.Tpn() > 1 { // BitNet's attention refuses the layout first (Attention.SubNorm's CheckLayout)
		panic(core.LowerError{Err: &units.Error{Path: b.Name(b.ModuleName(m)),
			Msg:  "tensor parallelism is not modelled for BitNet's MLP (ffn_sub_norm norms the intermediate features: each rank would norm a shard of them)",
			Hint: "use tp=1 (FSDP shards it)"}})
	}
	defer b.Scope(b.ModuleName(m))()
	gate := Activation(b, m.Act, b.Linear("gate_proj", core.RoleGate, x, m.Dim, m.Hidden, false))
	up := b.Linear("up_proj", core.RoleUp, x, m.Dim, m.Hidden, false)
	h := b.Mul("act_mul", gate, up)
	h = b.LowerChild(&Norm{Name: "ffn_sub_norm", Dim: m.Hidden, RMS: true}, h)
	return b.Linear("down_proj", core.RoleDown, h, m.Hidden, m.Dim, false)
}
