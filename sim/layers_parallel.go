package sim

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Parallel feeds one input to every branch and sums the branches' outputs:
// branch1(x) + branch2(x) + ... It is the parallel attention and MLP block
// of GPT-NeoX (use_parallel_residual), GPT-J, Falcon and Phi-1/2 (wrapped
// in a Residual for the "+ x"), and the routed plus shared experts of
// Qwen2-MoE. The sums are out-of-place adds, which save nothing.
type Parallel struct {
	Name     string
	Branches []Layer
}

func (p *Parallel) Kind() string      { return "parallel" }
func (p *Parallel) Label() string     { return p.Name }
func (p *Parallel) Children() []Layer { return p.Branches }
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
		if d := widthIn(l); d > 0 {
			return d
		}
	}
	return 0
}

func (p *Parallel) OutDim() int64 {
	for _, l := range p.Branches {
		if d := widthOut(l); d > 0 {
			return d
		}
	}
	return 0
}

func (p *Parallel) validate(path string) error {
	if len(p.Branches) == 0 {
		return units.Errorf(path, "parallel needs at least one branch")
	}
	for i, l := range p.Branches {
		if err := l.validate(ChildPath(path, l, i)); err != nil {
			return err
		}
	}
	return nil
}

func (p *Parallel) lower(b *builder, x Value) Value {
	defer b.scope(p.Name)()
	var sum Value = NoValue
	for i, l := range p.Branches {
		y := b.lowerChild(l, i, x)
		if sum == NoValue {
			sum = y
			continue
		}
		if b.last(y) != b.last(sum) {
			panic(lowerError{units.Errorf(b.name(""), "parallel branches give different widths (%d and %d)", b.last(sum), b.last(y))})
		}
		sum = b.add("branch_sum", sum, y)
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
	Body Layer
}

func (g *Gated) Kind() string      { return "gated" }
func (g *Gated) Label() string     { return g.Name }
func (g *Gated) Children() []Layer { return []Layer{g.Body} }
func (g *Gated) Params() int64     { return g.Dim + g.Body.Params() }
func (g *Gated) Summary() string   { return "sigmoid(gate(x)) * " + g.Body.Kind() + "(x)" }
func (g *Gated) InDim() int64      { return g.Dim }
func (g *Gated) OutDim() int64     { return widthOut(g.Body) }

func (g *Gated) validate(path string) error {
	if err := positive(path, "dim", g.Dim); err != nil {
		return err
	}
	return g.Body.validate(ChildPath(path, g.Body, 0))
}

func (g *Gated) lower(b *builder, x Value) Value {
	if b.last(x) != g.Dim {
		panic(shapeMismatch(b, "gated", g.Dim, b.last(x)))
	}
	defer b.scope(g.Name)()
	y := b.lowerChild(g.Body, 0, x)
	gate := b.linear("gate", "shared_expert_gate", x, g.Dim, 1, false)
	s := activation(b, "sigmoid", gate)
	return b.mul("gated", s, y)
}
