package core

import (
	"reflect"
	"testing"
)

// paramLeaf is a named leaf of n parameters, for Describe's tests.
type paramLeaf struct {
	name string
	n    int64
}

func (p *paramLeaf) Kind() string                    { return "leaf" }
func (p *paramLeaf) Label() string                   { return p.name }
func (p *paramLeaf) Params() int64                   { return p.n }
func (p *paramLeaf) Children() []Layer               { return nil }
func (p *paramLeaf) Summary() string                 { return "" }
func (p *paramLeaf) Lower(b *Builder, x Value) Value { return x }
func (p *paramLeaf) Validate(string) error           { return nil }

// towerLeaf is an unnamed tower that names its own modules.
type towerLeaf struct{ paramLeaf }

func (t *towerLeaf) DefaultName() string { return "" }
func (t *towerLeaf) Modules() []ModuleRow {
	return []ModuleRow{{Path: "vision_tower", Kind: "tower", Params: t.n - 1}, {Path: "projector", Kind: "tower", Params: 1}}
}

// blockLeaf is an unnamed block whose parameters sit in modules of the
// layer around it (router), beside a child layer's (mlp); inline: none of
// its own, so it is listed as any other layer (Modules nil).
type blockLeaf struct {
	paramLeaf
	child  Layer
	inline bool
}

func (b *blockLeaf) DefaultName() string { return "" }
func (b *blockLeaf) Children() []Layer   { return []Layer{b.child} }
func (b *blockLeaf) Params() int64       { return b.n + b.child.Params() }
func (b *blockLeaf) Modules() []ModuleRow {
	if b.inline {
		return nil
	}
	return []ModuleRow{{Path: "router", Kind: "router", Params: b.n}}
}

// TestDescribe: Describe's rows, path and parameters, for the layouts
// its rules are for.
func TestDescribe(t *testing.T) {
	type row struct {
		path   string
		params int64
	}
	tower := &towerLeaf{paramLeaf{n: 10}}
	scale := &paramLeaf{name: "scale"}
	for _, c := range []struct {
		name  string
		model *Model
		want  []row
	}{
		{"a module split around a tower is one row, the tower's modules rows of their own", &Model{Layers: []Layer{&Sequential{Name: "model", Layers: []Layer{
			&Sequential{Name: "text", Layers: []Layer{&paramLeaf{"embed", 3}}},
			tower,
			&Sequential{Name: "text", Layers: []Layer{&paramLeaf{"layers", 5}, &paramLeaf{"norm", 1}}},
		}}}}, []row{{"model", 19}, {"model.text", 9}, {"model.text.embed", 3}, {"model.text.layers", 5}, {"model.text.norm", 1}, {"model.vision_tower", 9}, {"model.projector", 1}}},
		{"a module called twice is one row", &Model{Layers: []Layer{&Sequential{Name: "block", Layers: []Layer{scale, &paramLeaf{"mlp", 4}, scale}}}},
			[]row{{"block", 4}, {"block.scale", 0}, {"block.mlp", 4}}},
		{"a module no layer is sums its rows; a head's bias is its own", &Model{Layers: []Layer{&Sequential{Name: "lm.model", Layers: []Layer{&paramLeaf{"embed", 3}}}}, Vocab: 5, HeadName: "lm.head", HeadBias: true},
			[]row{{"lm", 8}, {"lm.model", 3}, {"lm.model.embed", 3}, {"lm.head", 5}}}, // a leaf has no width: the head is its bias
		{"a block's modules sit at its index in a stack, its children's rows after", &Model{Layers: []Layer{&Repeat{Name: "layers", N: 2, Layer: &blockLeaf{paramLeaf: paramLeaf{n: 3}, child: &paramLeaf{"mlp", 4}}}}},
			[]row{{"layers", 14}, {"layers.0-1.router", 3}, {"layers.0-1.mlp", 4}}},
		{"a block that lists no modules is walked as any layer", &Model{Layers: []Layer{&Sequential{Name: "block", Layers: []Layer{&blockLeaf{paramLeaf: paramLeaf{n: 0}, child: &paramLeaf{"mlp", 4}, inline: true}}}}},
			[]row{{"block", 4}, {"block.mlp", 4}}},
		{"a layer labelled into a sibling's module counts in its row", &Model{Layers: []Layer{&paramLeaf{"classifier", 6}, &paramLeaf{"classifier.out", 2}}},
			[]row{{"classifier", 8}, {"classifier.out", 2}}},
	} {
		var got []row
		for _, r := range c.model.Describe() {
			got = append(got, row{r.Path, r.Params})
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}
