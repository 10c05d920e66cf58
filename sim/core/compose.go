package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Sequential runs layers one after another.
type Sequential struct {
	Name   string
	Layers []Layer
}

func (s *Sequential) Kind() string        { return "sequential" }
func (s *Sequential) Label() string       { return s.Name }
func (s *Sequential) DefaultName() string { return "" }
func (s *Sequential) Children() []Layer   { return s.Layers }
func (s *Sequential) Params() int64 {
	var n int64
	for _, l := range s.Layers {
		n += l.Params()
	}
	return n
}
func (s *Sequential) Summary() string { return fmt.Sprintf("%d layers", len(s.Layers)) }
func (s *Sequential) Validate(path string) error {
	for _, l := range s.Layers {
		if err := l.Validate(ChildPath(path, s, l)); err != nil {
			return err
		}
	}
	return nil
}
func (s *Sequential) Lower(b *Builder, x Value) Value {
	defer b.Scope(s.Name)()
	for _, l := range s.Layers {
		x = b.LowerChild(l, x)
	}
	return x
}

// LowerChild lowers a child layer, opening a checkpoint region when
// checkpoint(modules=[...]) names it. The layer opens its own module scope.
func (b *Builder) LowerChild(l Layer, x Value) Value {
	if b.Ckpt.matches(l) {
		defer b.PolicyRegion(l.Kind())()
	}
	return l.Lower(b, x)
}

// Repeat is n copies of one layer (the transformer blocks). Each copy is a
// "block" for checkpoint="full" and checkpoint(every=k).
type Repeat struct {
	Name  string
	Layer Layer
	N     int64
}

func (r *Repeat) Kind() string        { return "repeat" }
func (r *Repeat) Label() string       { return r.Name }
func (r *Repeat) DefaultName() string { return "layers" }
func (r *Repeat) Children() []Layer   { return []Layer{r.Layer} }
func (r *Repeat) Params() int64       { return r.N * r.Layer.Params() }
func (r *Repeat) Summary() string     { return fmt.Sprintf("%d x %s", r.N, r.Layer.Kind()) }
func (r *Repeat) Validate(path string) error {
	if r.N <= 0 {
		return units.Errorf(path, "repeat count must be positive (got %d)", r.N)
	}
	return r.Layer.Validate(ChildPath(path, r, r.Layer))
}
func (r *Repeat) Lower(b *Builder, x Value) Value {
	defer b.Scope(ModuleName(r))()
	ops, values, params := len(b.P.Ops), len(b.P.Values), len(b.P.Params)
	for i := int64(0); i < r.N; i++ {
		done := b.Scope(fmt.Sprintf("%d", i))
		closeBlock := b.OpenBlock() // its policy, checkpoint region and compiled graph
		x = b.LowerChild(r.Layer, x)
		closeBlock()
		done()
		if i == 0 {
			b.P.reserve(r.N-1, ops, values, params) // room for the other copies
		}
	}
	return x
}

// Residual is x + layer(x).
type Residual struct {
	Name  string
	Layer Layer
}

func (r *Residual) Kind() string               { return "residual" }
func (r *Residual) Label() string              { return r.Name }
func (r *Residual) DefaultName() string        { return "" }
func (r *Residual) Children() []Layer          { return []Layer{r.Layer} }
func (r *Residual) Params() int64              { return r.Layer.Params() }
func (r *Residual) Summary() string            { return "x + " + r.Layer.Kind() + "(x)" }
func (r *Residual) Validate(path string) error { return r.Layer.Validate(ChildPath(path, r, r.Layer)) }
func (r *Residual) Lower(b *Builder, x Value) Value {
	defer b.Scope(r.Name)()
	y := b.LowerChild(r.Layer, x)
	if b.Last(y) != b.Last(x) {
		where := "" // the module path alone ("1") reads as a number, so name it
		if p := b.Name(""); p != "" {
			where = " (module " + p + ")"
		}
		panic(LowerError{&units.Error{Msg: fmt.Sprintf("residual%s: its %s changes the width (%d -> %d)", where, r.Layer.Kind(), b.Last(x), b.Last(y)),
			Hint: "residual(layer) adds layer(x) to x, so the layer must give as many features as it takes"}})
	}
	return b.Add("residual", x, y)
}
