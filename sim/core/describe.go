package core

import (
	"fmt"
	"strings"
)

// ModuleRow is one line of Model.Describe.
type ModuleRow struct {
	Path    string
	Kind    string
	Summary string
	Params  int64
}

// ModuleLister is a layer that holds modules of the model's tree without
// being built of child layers for them: a vision tower that names its
// own sub-modules (vision_tower, multi_modal_projector) beside the text
// model's; a block whose parameters sit in modules of the decoder layer
// (Gemma 4's router and experts, BERT's intermediate and output.dense).
// Modules are its rows in describe() in place of its own, each Path
// relative to the path of the layer's parent (to the block's, for a
// block of a stack), in the tree's order; its children's rows follow.
// The rows' Params and the children's sum to the layer's. Modules nil:
// the layer is listed as any other (an MLP that is a module of its own).
type ModuleLister interface {
	Modules() []ModuleRow
}

// Describe lists the model's modules with their parameter counts, each
// path once, parents before their children: a module a reader splits
// around a tower (a VL model's language_model, its embeddings before
// the images and its layers after) is one row, its parts' parameters
// summed; a tower's own modules (ModuleLister) are rows of their own;
// a module of the tree that no layer is (Llama 4's language_model,
// which holds model and lm_head) is the sum of its rows. The top-level
// rows' parameters sum to Params (the head of tied weights counts 0).
func (m *Model) Describe() []ModuleRow {
	var t moduleTree
	for _, l := range m.Layers {
		t.walk("", nil, l, "")
	}
	if m.Vocab > 0 {
		p := m.outDim() * m.Vocab
		s := fmt.Sprintf("%d -> %d", m.outDim(), m.Vocab)
		if m.Tied() {
			p, s = 0, s+" (tied to the embedding)"
		}
		if m.HeadBias {
			p, s = p+m.Vocab, s+", bias"
		}
		t.add(ModuleRow{Path: m.Head(), Kind: "linear", Summary: s, Params: p}, nil)
		t.within(m.Head(), "", p) // a head inside a layer's module
	}
	return t.rows()
}

// walk adds l, the child of the layer of at path parent, and the layers
// below it; owner is the path of the row of the nearest module l is a
// layer of ("" for none).
func (t *moduleTree) walk(parent string, of, l Layer, owner string) {
	path := ChildPath(parent, of, l)
	if ml, ok := l.(ModuleLister); ok {
		if rows := ml.Modules(); rows != nil {
			base := parent
			if ModuleName(l) == "" {
				base = path // a block of a stack: its index
			}
			for _, r := range rows {
				r.Path = JoinName(base, r.Path)
				t.add(r, nil)
			}
			for _, c := range l.Children() {
				t.walk(base, l, c, owner)
			}
			return
		}
	}
	if ModuleName(l) != "" { // else how a block is written (sequential, residual), not a module
		t.add(ModuleRow{Path: path, Kind: l.Kind(), Summary: l.Summary(), Params: l.Params()}, l)
		t.within(path, owner, l.Params())
		owner = path
	}
	for _, c := range l.Children() {
		t.walk(path, l, c, owner)
	}
}

// moduleTree gathers Describe's rows by path: a path met again is merged
// into its first row, and the rows come out in the tree's order, each
// after its nearest listed ancestor's.
type moduleTree struct {
	list []ModuleRow
	at   map[string]int     // path -> index in list
	seqs map[string][]Layer // a merged sequential's parts, for its summary
}

func (t *moduleTree) add(r ModuleRow, l Layer) {
	if t.at == nil {
		t.at, t.seqs = map[string]int{}, map[string][]Layer{}
	}
	i, ok := t.at[r.Path]
	if !ok {
		t.at[r.Path] = len(t.list)
		t.list = append(t.list, r)
		if s, ok := l.(*Sequential); ok {
			t.seqs[r.Path] = s.Layers
		}
		return
	}
	row := &t.list[i]
	if s, ok := l.(*Sequential); ok && row.Kind == r.Kind {
		row.Params += r.Params
		t.seqs[r.Path] = append(t.seqs[r.Path][:len(t.seqs[r.Path]):len(t.seqs[r.Path])], s.Layers...)
		row.Summary = (&Sequential{Layers: t.seqs[r.Path]}).Summary()
	}
	// else the same module called again (Granite's residual_multiplier,
	// twice a block): one row.
}

// within adds n parameters to the rows of path's listed ancestors below
// owner's: modules that hold path's though it is no layer of theirs (a
// layer labelled classifier.out_proj beside the classifier pooler, as
// RobertaClassificationHead names it; the model's head).
func (t *moduleTree) within(path, owner string, n int64) {
	for {
		k, ok := t.parent(path)
		if !ok || t.list[k].Path == owner {
			return
		}
		t.list[k].Params += n
		path = t.list[k].Path
	}
}

// rows is the list in the tree's order: each row's children (the rows
// whose nearest listed ancestor it is) follow it, in the order met. A
// row under no listed ancestor whose path has several components gets
// its first as a row of kind "module" (roots), its children's sum.
func (t *moduleTree) rows() []ModuleRow {
	t.roots()
	kids := make([][]int, len(t.list)+1) // the last: the roots
	for i, r := range t.list {
		parent, ok := t.parent(r.Path)
		if !ok {
			parent = len(t.list)
		}
		kids[parent] = append(kids[parent], i)
	}
	for i := range t.list {
		if t.list[i].Kind == moduleKind && t.list[i].Summary == "" {
			for _, k := range kids[i] {
				t.list[i].Params += t.list[k].Params
			}
			t.list[i].Summary = fmt.Sprintf("%d modules", len(kids[i]))
		}
	}
	out := make([]ModuleRow, 0, len(t.list))
	var visit func(int)
	visit = func(n int) {
		for _, i := range kids[n] {
			out = append(out, t.list[i])
			visit(i)
		}
	}
	visit(len(t.list))
	return out
}

// moduleKind is the kind of a row that no layer is (rows).
const moduleKind = "module"

// roots inserts a row for the first component of each path under no
// listed ancestor, before the first such path.
func (t *moduleTree) roots() {
	var list []ModuleRow
	added := false
	for _, r := range t.list {
		if _, ok := t.parent(r.Path); !ok {
			if first, _, nested := strings.Cut(r.Path, "."); nested {
				if _, ok := t.at[first]; !ok {
					t.at[first] = -1
					list = append(list, ModuleRow{Path: first, Kind: moduleKind})
					added = true
				}
			}
		}
		list = append(list, r)
	}
	if !added {
		return
	}
	t.list = list
	for i, r := range list {
		t.at[r.Path] = i
	}
}

// parent is the index of the row of path's nearest listed ancestor.
func (t *moduleTree) parent(path string) (int, bool) {
	for {
		j := strings.LastIndexByte(path, '.')
		if j < 0 {
			return 0, false
		}
		path = path[:j]
		if k, ok := t.at[path]; ok {
			return k, true
		}
	}
}
