package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/graph"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Nodes is a grid or a mesh (type "grid" or "mesh").
type Nodes struct {
	n    *graph.NodeSet
	decl syntax.Position
}

// Sim returns the wrapped node set.
func (x *Nodes) Sim() *graph.NodeSet { return x.n }

func (x *Nodes) Type() string { return x.n.Kind }

func (x *Nodes) Freeze() {}

func (x *Nodes) Truth() starlark.Bool { return starlark.True }

func (x *Nodes) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: %s", x.n.Kind)
}

func (x *Nodes) String() string {
	s := fmt.Sprintf("%s(%q, %s nodes", x.n.Kind, x.n.Name, host.Thousands(x.n.Nodes))
	if x.n.Estimate {
		s += ", estimate"
	}
	return s + ")"
}

var nodesAttrNames = []string{"estimate", "global_nodes", "kind", "name", "nodes", "points", "refinement", "regional_nodes", "rule"}

func (x *Nodes) AttrNames() []string { return nodesAttrNames }

func (x *Nodes) Attr(name string) (starlark.Value, error) {
	n := x.n
	switch name {
	case "kind":
		return starlark.String(n.Kind), nil
	case "name":
		return starlark.String(n.Name), nil
	case "nodes", "points":
		return starlark.MakeInt64(n.Nodes), nil
	case "estimate":
		return starlark.Bool(n.Estimate), nil
	case "rule":
		return starlark.String(n.Rule), nil
	case "refinement":
		if n.Refinement < 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt(n.Refinement), nil
	case "regional_nodes", "global_nodes":
		v := n.Regional
		if name == "global_nodes" {
			v = n.Global
		}
		if n.Regional == 0 && n.Global == 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt64(v), nil
	}
	return nil, nil
}

// Edges is a set of directed edges between two node sets (type "edges").
type Edges struct {
	e        *graph.EdgeSet
	src, dst *Nodes
}

// Sim returns the wrapped edge set.
func (x *Edges) Sim() *graph.EdgeSet { return x.e }

func (x *Edges) Type() string { return "edges" }

func (x *Edges) Freeze() {}

func (x *Edges) Truth() starlark.Bool { return starlark.True }

func (x *Edges) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: edges")
}

func (x *Edges) String() string {
	s := fmt.Sprintf("%s_edges(%s -> %s, %s edges", x.e.Kind, x.e.Src.Name, x.e.Dst.Name, host.Thousands(x.e.Count))
	if x.e.Estimate {
		s += ", estimate"
	}
	return s + ")"
}

var edgesAttrNames = []string{"count", "dst", "estimate", "kind", "per_node", "rule", "src"}

func (x *Edges) AttrNames() []string { return edgesAttrNames }

func (x *Edges) Attr(name string) (starlark.Value, error) {
	e := x.e
	switch name {
	case "kind":
		return starlark.String(e.Kind), nil
	case "src":
		return x.src, nil
	case "dst":
		return x.dst, nil
	case "count":
		return starlark.MakeInt64(e.Count), nil
	case "per_node":
		return starlark.Float(e.PerDst), nil
	case "estimate":
		return starlark.Bool(e.Estimate), nil
	case "rule":
		return starlark.String(e.Rule), nil
	}
	return nil, nil
}
