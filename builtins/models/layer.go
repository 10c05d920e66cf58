package models

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Layer is the Starlark value of any model building block (linear,
// attention, graph_transformer, table, sequential, ...). It wraps an
// immutable sim.Layer and the position of the call that built it. Its type
// name is "layer"; l.kind tells which constructor made it.
type Layer struct {
	l    core.Layer
	decl syntax.Position
}

var (
	_ starlark.HasAttrs   = (*Layer)(nil)
	_ starlark.Comparable = (*Layer)(nil)
)

// NewLayer wraps l, declared at decl (use CallerPos(thread) in constructors).
func NewLayer(l core.Layer, decl syntax.Position) *Layer { return &Layer{l: l, decl: decl} }

// Sim returns the wrapped sim.Layer.
func (x *Layer) Sim() core.Layer { return x.l }

// Decl is where the layer was built.
func (x *Layer) Decl() syntax.Position { return x.decl }

func (x *Layer) Type() string         { return "layer" }
func (x *Layer) Freeze()              {}
func (x *Layer) Truth() starlark.Bool { return starlark.True }
func (x *Layer) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: layer")
}

func (x *Layer) String() string {
	s := fmt.Sprintf("%s(%s", x.l.Kind(), x.l.Summary())
	if n := x.l.Label(); n != "" {
		s += fmt.Sprintf(", name=%q", n)
	}
	return s + fmt.Sprintf(", params=%d)", x.l.Params())
}

func (x *Layer) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	o := y.(*Layer)
	switch op {
	case syntax.EQL:
		return x.l == o.l, nil
	case syntax.NEQ:
		return x.l != o.l, nil
	}
	return false, fmt.Errorf("%s not supported for layers", op)
}

var layerAttrNames = []string{"children", "kind", "name", "params"}

func (x *Layer) AttrNames() []string { return layerAttrNames }

func (x *Layer) Attr(name string) (starlark.Value, error) {
	switch name {
	case "kind":
		return starlark.String(x.l.Kind()), nil
	case "name":
		if x.l.Label() == "" {
			return starlark.None, nil
		}
		return starlark.String(x.l.Label()), nil
	case "params":
		return starlark.MakeInt64(x.l.Params()), nil
	case "children":
		var out []starlark.Value
		for _, c := range x.l.Children() {
			out = append(out, NewLayer(c, x.decl))
		}
		return starlark.Tuple(out), nil
	}
	return nil, nil
}
