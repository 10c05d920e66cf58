package sim

import "fmt"

// Sequential runs layers one after another.
type Sequential struct {
	Name   string
	Layers []Layer
}

func (s *Sequential) Kind() string      { return "sequential" }
func (s *Sequential) Label() string     { return s.Name }
func (s *Sequential) Children() []Layer { return s.Layers }
func (s *Sequential) Params() int64 {
	var n int64
	for _, l := range s.Layers {
		n += l.Params()
	}
	return n
}
func (s *Sequential) Summary() string { return fmt.Sprintf("%d layers", len(s.Layers)) }
func (s *Sequential) validate(path string) error {
	for i, l := range s.Layers {
		if err := l.validate(childPath(path, l, i)); err != nil {
			return err
		}
	}
	return nil
}
func (s *Sequential) lower(b *builder, x Value) Value {
	defer b.scope(s.Name)()
	for i, l := range s.Layers {
		x = b.lowerChild(l, i, x)
	}
	return x
}

// lowerChild lowers a child layer under its own name, opening a checkpoint
// region when checkpoint(modules=[...]) names it.
func (b *builder) lowerChild(l Layer, i int, x Value) Value {
	if b.ckpt.matches(l) {
		defer b.beginRegion(l.Kind())()
	}
	if l.Label() == "" {
		switch l.(type) {
		case *Sequential, *Repeat, *Residual:
			defer b.scope(fmt.Sprintf("%d", i))()
		}
	}
	return l.lower(b, x)
}

// Repeat is n copies of one layer (the transformer blocks). Each copy is a
// "block" for checkpoint="full" and checkpoint(every=k).
type Repeat struct {
	Name  string
	Layer Layer
	N     int64
}

func (r *Repeat) Kind() string      { return "repeat" }
func (r *Repeat) Label() string     { return r.Name }
func (r *Repeat) Children() []Layer { return []Layer{r.Layer} }
func (r *Repeat) Params() int64     { return r.N * r.Layer.Params() }
func (r *Repeat) Summary() string   { return fmt.Sprintf("%d x %s", r.N, r.Layer.Kind()) }
func (r *Repeat) validate(path string) error {
	if r.N <= 0 {
		return errorf(path, "repeat count must be positive (got %d)", r.N)
	}
	return r.Layer.validate(childPath(path, r.Layer, 0))
}
func (r *Repeat) lower(b *builder, x Value) Value {
	name := r.Name
	if name == "" {
		name = "layers"
	}
	defer b.scope(name)()
	ops, values, params := len(b.p.ops), len(b.p.values), len(b.p.params)
	for i := int64(0); i < r.N; i++ {
		done := b.scope(fmt.Sprintf("%d", i))
		closeRegion := func() {}
		if b.ckpt.block(b.block) {
			closeRegion = b.beginRegion("block")
		}
		b.block++
		x = b.lowerChild(r.Layer, 0, x)
		closeRegion()
		done()
		if i == 0 {
			b.p.reserve(r.N-1, ops, values, params) // program.go: room for the other copies
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
func (r *Residual) Children() []Layer          { return []Layer{r.Layer} }
func (r *Residual) Params() int64              { return r.Layer.Params() }
func (r *Residual) Summary() string            { return "x + " + r.Layer.Kind() + "(x)" }
func (r *Residual) validate(path string) error { return r.Layer.validate(childPath(path, r.Layer, 0)) }
func (r *Residual) lower(b *builder, x Value) Value {
	defer b.scope(r.Name)()
	y := b.lowerChild(r.Layer, 0, x)
	if b.last(y) != b.last(x) {
		where := "" // the module path alone ("1") reads as a number, so name it
		if p := b.name(""); p != "" {
			where = " (module " + p + ")"
		}
		panic(lowerError{&Error{Msg: fmt.Sprintf("residual%s: its %s changes the width (%d -> %d)", where, r.Layer.Kind(), b.last(x), b.last(y)),
			Hint: "residual(layer) adds layer(x) to x, so the layer must give as many features as it takes"}})
	}
	return b.add("residual", x, y)
}
