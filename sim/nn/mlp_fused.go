package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// FusedGLU is a gated MLP whose gate and up projections are one linear
// (Granite 4.0's shared expert, GraniteMoeHybridMLP in
// models/granitemoehybrid/modeling_granitemoehybrid.py at 5.25.0):
//
//	gate, up = input_linear(x).chunk(2, dim=-1)   # [T, 2*hidden], no bias
//	y = output_linear(act(gate) * up)
//
// gate and up are views of input_linear's one output: the activation
// keeps gate and the product keeps up, so that output, the whole [T,
// 2*hidden] storage, is what both keep; their gradients are cat back into
// one [T, 2*hidden] tensor for input_linear's backward. LoRA reaches
// input_linear as an "up" projection and output_linear as a "down" one.
type FusedGLU struct {
	Name   string
	Dim    int64
	Hidden int64
	Act    string // swiglu or geglu
}

func (m *FusedGLU) Kind() string           { return "mlp" }
func (m *FusedGLU) Label() string          { return m.Name }
func (m *FusedGLU) Children() []core.Layer { return nil }
func (m *FusedGLU) Params() int64          { return 3 * m.Dim * m.Hidden }
func (m *FusedGLU) InDim() int64           { return m.Dim }
func (m *FusedGLU) OutDim() int64          { return m.Dim }
func (m *FusedGLU) Summary() string {
	return fmt.Sprintf("%d -> 2x%d (one input_linear) -> %d, %s", m.Dim, m.Hidden, m.Dim, m.Act)
}

func (m *FusedGLU) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, m.Dim}, sized{FieldHidden, m.Hidden}); err != nil {
		return err
	}
	if m.Act != "swiglu" && m.Act != "geglu" {
		return units.Errorf(path, "a fused gated MLP's act must be swiglu or geglu (got %q)", m.Act)
	}
	return nil
}

// CheckLayout: tensor parallelism would split input_linear's rows across
// the gate and up halves; not modelled.
func (m *FusedGLU) CheckLayout(path string, par core.Parallelism) error {
	if par.TP > 1 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d: tensor parallelism of a fused gate and up projection (input_linear) is not modelled", par.TP),
			Hint: "use data parallelism (with FSDP or ZeRO) or pipeline parallelism"}
	}
	return nil
}

func (m *FusedGLU) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "mlp", m.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(m))()
	gateUp := b.Linear("input_linear", core.RoleUp, x, m.Dim, 2*m.Hidden, false)
	h := gatedHalves(b, gateUp, m.Hidden, m.Act, "input_linear")
	return b.Linear("output_linear", core.RoleDown, h, m.Hidden, m.Dim, false)
}

// gatedHalves is act(gate) * up over the two halves of one projection's
// output (torch.chunk's views, or slices): the activation keeps its
// input, the gate view, and the product the activation's output and the
// up view, both views holding the projection's whole storage. act is
// swiglu or geglu; proj names the projection in the values' whys.
func gatedHalves(b *core.Builder, gateUp core.Value, hidden int64, act, proj string) core.Value {
	half := core.WithLast(b.Shape(gateUp), hidden)
	dt := b.Dtype(gateUp)
	fn := "silu"
	if act == "geglu" {
		fn = "gelu"
	}
	a := b.AddOp(fn, fn, []core.Value{gateUp})
	y := b.Out(a, fn, half, dt, fn+" of "+proj+"'s gate half")
	b.Save(a, gateUp) // the gate view holds the whole storage
	b.Op(a).Flops = 8 * float64(core.Numel(half))
	b.Op(a).Bytes += float64(dt.Bytes(core.Numel(half)))
	p := b.AddOp("mul", "act_mul", []core.Value{y, gateUp})
	h := b.Out(p, "act_mul", half, dt, "gated product (act(gate) * up)")
	b.Save(p, y, gateUp) // and the up view
	b.Op(p).Flops = float64(core.Numel(half))
	b.Op(p).Bytes += 2 * float64(dt.Bytes(core.Numel(half)))
	return h
}
