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

// Repeat is n copies of one layer (the transformer blocks), or a stack of
// blocks that differ (Blocks: DeepSeek's dense then MoE layers, Gemma 3's
// local and global layers, a hybrid's Mamba and attention layers), named
// layers.0, layers.1, ... as transformers names them. Each block is a
// "block" for checkpoint="full" and checkpoint(every=k), and pipeline
// stages split the blocks.
type Repeat struct {
	Name  string
	Layer Layer
	N     int64
	// Blocks are the blocks in order when they differ; Layer and N are
	// then unused. A block kind appears as one layer value, shared.
	Blocks []Layer
}

// Count is the number of blocks.
func (r *Repeat) Count() int64 {
	if r.Blocks != nil {
		return int64(len(r.Blocks))
	}
	return r.N
}

// Block is block i.
func (r *Repeat) Block(i int64) Layer {
	if r.Blocks != nil {
		return r.Blocks[i]
	}
	return r.Layer
}

func (r *Repeat) Kind() string        { return "repeat" }
func (r *Repeat) Label() string       { return r.Name }
func (r *Repeat) DefaultName() string { return "layers" }

// Children are the distinct blocks, in order of first appearance.
func (r *Repeat) Children() []Layer {
	if r.Blocks == nil {
		return []Layer{r.Layer}
	}
	var out []Layer
	for _, l := range r.Blocks {
		if !containsLayerValue(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func containsLayerValue(ls []Layer, l Layer) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

func (r *Repeat) Params() int64 {
	var n int64
	for _, c := range r.Children() {
		n += r.countOf(c) * c.Params()
	}
	return n
}

// countOf is how many blocks are layer c.
func (r *Repeat) countOf(c Layer) int64 {
	if r.Blocks == nil {
		return r.N
	}
	var n int64
	for _, l := range r.Blocks {
		if l == c {
			n++
		}
	}
	return n
}

func (r *Repeat) Summary() string {
	if r.Blocks == nil {
		return fmt.Sprintf("%d x %s", r.N, r.Layer.Kind())
	}
	return fmt.Sprintf("%d blocks of %d kinds", len(r.Blocks), len(r.Children()))
}

func (r *Repeat) Validate(path string) error {
	if r.Count() <= 0 {
		return units.Errorf(path, "repeat count must be positive (got %d)", r.Count())
	}
	for _, c := range r.Children() {
		if c == nil {
			return units.Errorf(path, "a block of the stack is missing")
		}
		if err := c.Validate(ChildPath(path, r, c)); err != nil {
			return err
		}
	}
	return nil
}

// indices are the block indices holding layer c, in a stack of
// differing blocks.
func (r *Repeat) indices(c Layer) []int64 {
	var out []int64
	for i, l := range r.Blocks {
		if l == c {
			out = append(out, int64(i))
		}
	}
	return out
}

func (r *Repeat) Lower(b *Builder, x Value) Value {
	defer b.Scope(ModuleName(r))()
	ops, values, params, comm := len(b.P.Ops), len(b.P.Values), len(b.P.Params), len(b.P.Comm)
	var srcs blockCopies // the blocks to copy (block_clone.go)
	for i := int64(0); i < r.Count(); i++ {
		if i == 1 {
			ops, values, params, comm = len(b.P.Ops), len(b.P.Values), len(b.P.Params), len(b.P.Comm)
		}
		done := b.Scope(Itoa(i))
		x, srcs = b.lowerBlock(r.Block(i), x, srcs, b.decoderLayers[r])
		done()
		// Room for the other copies (alike or not), sized as the second
		// block: the first often lowers unlike the rest (a stack of
		// linears casts the batch in its first, and room for 65,535 such
		// copies was half again the program's ops).
		if i == min(1, r.Count()-1) {
			b.P.reserve(r.Count()-1-i, reserveTail, ops, values, params, comm)
		}
	}
	return x
}

// Residual is x + layer(x).
type Residual struct {
	Name  string
	Layer Layer
	// FP32 keeps the residual stream in fp32 (residual_in_fp32: transformers'
	// MambaBlock, Mamba2Block, NemotronHBlock): the layer reads x cast to the
	// parameters' dtype, and x + layer(x) adds to x cast to fp32, so the sum,
	// the next block's input, is fp32.
	FP32 bool
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
	xin := x
	if r.FP32 {
		xin = b.Cast(x, b.Prec.Params, "the residual stream in the parameters' dtype for the block (residual_in_fp32)")
		x = b.Cast(x, units.FP32, "the residual in fp32 (residual_in_fp32)")
	}
	y := b.LowerChild(r.Layer, xin)
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
