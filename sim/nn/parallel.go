package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Parallel feeds one input to every branch and sums the branches' outputs:
// branch1(x) + branch2(x) + ... It is the parallel attention and MLP block
// of GPT-NeoX (use_parallel_residual), GPT-J, Falcon and Phi-1/2 (wrapped
// in a Residual for the "+ x"), and the routed plus shared experts of
// Qwen2-MoE. The sums are out-of-place adds, which save nothing.
type Parallel struct {
	Name     string
	Branches []core.Layer
}

func (p *Parallel) Kind() string           { return "parallel" }
func (p *Parallel) Label() string          { return p.Name }
func (p *Parallel) DefaultName() string    { return "" }
func (p *Parallel) Children() []core.Layer { return p.Branches }
func (p *Parallel) Params() int64 {
	var n int64
	for _, l := range p.Branches {
		n += l.Params()
	}
	return n
}
func (p *Parallel) Summary() string { return fmt.Sprintf("sum of %d branches", len(p.Branches)) }

// InDim and OutDim let Model infer widths through the block.
func (p *Parallel) InDim() int64 {
	for _, l := range p.Branches {
		if d := core.WidthIn(l); d > 0 {
			return d
		}
	}
	return 0
}

func (p *Parallel) OutDim() int64 {
	for _, l := range p.Branches {
		if d := core.WidthOut(l); d > 0 {
			return d
		}
	}
	return 0
}

func (p *Parallel) Validate(path string) error {
	if len(p.Branches) == 0 {
		return units.Errorf(path, "parallel needs at least one branch")
	}
	for _, l := range p.Branches {
		if err := l.Validate(core.ChildPath(path, p, l)); err != nil {
			return err
		}
	}
	return nil
}

func (p *Parallel) Lower(b *core.Builder, x core.Value) core.Value {
	defer b.Scope(p.Name)()
	var sum core.Value = core.NoValue
	for _, l := range p.Branches {
		y := b.LowerChild(l, x)
		if sum == core.NoValue {
			sum = y
			continue
		}
		if b.Last(y) != b.Last(sum) {
			panic(core.LowerError{Err: units.Errorf(b.Name(""), "parallel branches give different widths (%d and %d)", b.Last(sum), b.Last(y))})
		}
		sum = b.Add("branch_sum", sum, y)
	}
	return sum
}

// Gated is sigmoid(gate(x)) * body(x) with gate = Linear(dim, 1, bias=False):
// Qwen2-MoE's shared expert and its shared_expert_gate
// (transformers/models/qwen2_moe/modeling_qwen2_moe.py,
// Qwen2MoeSparseMoeBlock.forward).
type Gated struct {
	Name string
	Dim  int64
	Body core.Layer
}

func (g *Gated) Kind() string           { return "gated" }
func (g *Gated) Label() string          { return g.Name }
func (g *Gated) DefaultName() string    { return "" }
func (g *Gated) Children() []core.Layer { return []core.Layer{g.Body} }
func (g *Gated) Params() int64          { return g.Dim + g.Body.Params() }
func (g *Gated) Summary() string        { return "sigmoid(gate(x)) * " + g.Body.Kind() + "(x)" }
func (g *Gated) InDim() int64           { return g.Dim }
func (g *Gated) OutDim() int64          { return core.WidthOut(g.Body) }

func (g *Gated) Validate(path string) error {
	if err := core.Positive(path, "dim", g.Dim); err != nil {
		return err
	}
	return g.Body.Validate(core.ChildPath(path, g, g.Body))
}

func (g *Gated) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != g.Dim {
		panic(core.ShapeMismatch(b, "gated", g.Dim, b.Last(x)))
	}
	defer b.Scope(g.Name)()
	y := b.LowerChild(g.Body, x)
	gate := b.Linear("gate", "shared_expert_gate", x, g.Dim, 1, false)
	s := Activation(b, "sigmoid", gate)
	return b.Mul("gated", s, y)
}
