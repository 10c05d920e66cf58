package core

import "testing"

// TestAppendChildPath: appendChildPath writes ChildPath's text, for every
// kind of parent (a repeat of one block, of one, of blocks that differ,
// some shared; a residual; a sequential) and parent path (none, some),
// named children and unnamed.
func TestAppendChildPath(t *testing.T) {
	a, b := &Sequential{Name: "attn"}, &Sequential{Name: "mlp"}
	unnamed := &Sequential{}
	shared := &Residual{Name: "local", Layer: a}
	blocks := make([]Layer, 0, 200)
	for i := range 200 {
		if i%7 == 3 {
			blocks = append(blocks, b)
		} else {
			blocks = append(blocks, shared)
		}
	}
	parents := []struct {
		of       Layer
		children []Layer
	}{
		{&Repeat{Name: "layers", Layer: a, N: 80}, []Layer{a}},
		{&Repeat{Name: "layers", Layer: a, N: 1}, []Layer{a}},
		{&Repeat{Name: "layers", Layer: unnamed, N: 12}, []Layer{unnamed}},
		{&Repeat{Name: "layers", Blocks: blocks}, []Layer{shared, b}},
		{&Repeat{Name: "layers", Blocks: []Layer{a, b, a}}, []Layer{a, b}},
		{&Residual{Name: "res", Layer: a}, []Layer{a}},
		{&Residual{Layer: unnamed}, []Layer{unnamed}},
		{&Sequential{Name: "seq", Layers: []Layer{a, unnamed, b}}, []Layer{a, unnamed, b}},
		{nil, []Layer{a, unnamed}},
	}
	for _, parent := range []string{"", "model", "model.layers.0-3"} {
		for _, p := range parents {
			for _, c := range p.children {
				want := ChildPath(parent, p.of, c)
				room := make([]byte, 0, 4) // grown past its room too
				if got := string(appendChildPath(append(room, parent...), p.of, c)); got != want {
					t.Errorf("appendChildPath(%q, %T, %q) = %q, want %q", parent, p.of, ModuleName(c), got, want)
				}
			}
		}
	}
}
