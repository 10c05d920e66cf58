package core

import (
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Layer is an immutable module of a model. Layers lower to ops (lower),
// count their parameters exactly (Params) and describe themselves.
type Layer interface {
	// Kind is the constructor name users type ("linear", "attention").
	Kind() string
	// Label is the user's name for the layer, or "".
	Label() string
	// Params is the exact parameter count (unsharded, tied weights once).
	Params() int64
	// Children are the sub-layers, for describe() and traversal.
	Children() []Layer
	// Summary is a short one-line description of the layer's shape.
	Summary() string
	// lower emits this layer's forward ops for input x and returns its output.
	Lower(b *Builder, x Value) Value
	// validate checks sizes; path names the layer in errors.
	Validate(path string) error
}

// Optional interfaces: what model-level rules ask of a layer without
// knowing its kind.

// TokenLookup is a layer that looks token ids up (an embedding). A model
// whose first layer is one takes token ids as input; an output head tied
// to the embeddings shares the first one's weight.
type TokenLookup interface {
	Layer
	// LookupShape is the table's [rows, dim].
	LookupShape() (rows, dim int64)
}

// LayoutChecker is a layer that tensor or expert parallelism splits: it
// checks that the layout's degrees divide it. The path names the layer in
// the error; whether an error is returned must not depend on it (the
// layers are checked without paths first: Model.validateParallel).
type LayoutChecker interface {
	CheckLayout(path string, par Parallelism) error
}

// LayoutFitter is a LayoutChecker that says whether it refuses a layout
// without making the refusal: FitsLayout(par) is CheckLayout(path, par)
// == nil. The layout check's path-free pass asks it (layoutFits), where
// a search meets tens of thousands of refusals it would drop.
type LayoutFitter interface {
	LayoutChecker
	FitsLayout(par Parallelism) bool
}

// layoutFits says whether c accepts par's layout: FitsLayout where c has
// it, else CheckLayout without a path.
func layoutFits(c LayoutChecker, par Parallelism) bool {
	if f, ok := c.(LayoutFitter); ok {
		return f.FitsLayout(par)
	}
	return c.CheckLayout("", par) == nil
}

// ExpertLayer is a layer of experts that expert parallelism spreads.
type ExpertLayer interface {
	ExpertCount() int64
}

// PackingChecker is a layer that cannot run on packed documents (one row
// of several sequences) as it is configured; CheckPacking says why, under
// the plan's packing (Plan.Packing).
type PackingChecker interface {
	CheckPacking(path string, p Packing) error
}

// Packing is what a layer's packing check reads of the plan: a value, so
// that the plan a search checks for each layout stays on its stack (a
// *Plan handed to an interface method escapes, a plan's copy on the heap
// per layout: 2 KB of 231,968 layouts in BenchmarkSearchLlama405B16384).
type Packing struct {
	Row                bool   // one packed row (Plan.TokensPerBatch)
	ForwardCache       bool   // the forward fills transformers' DynamicCache (Plan.ForwardCache)
	PackedSequenceMask bool   // the runtime's masking_utils masks packed rows (Runtime.PackedSequenceMask)
	Runtime            string // the runtime's name, for the refusal
}

// Module names. A model's tensors and ops are named by module path, as
// PyTorch names a module tree (model.layers.28.self_attn.v_proj.weight):
//
//   - a layer the user (or a config reader) named adds its name;
//   - an unnamed Sequential, Residual or parallel branches add nothing:
//     they are how a block is written, not modules of their own;
//   - an unnamed repeat adds "layers", and each of its blocks its index;
//   - an unnamed leaf adds its default name (DefaultName, else its kind:
//     "attn", "mlp", "linear"), numbered when siblings share it
//     (Builder.ModuleName).
//
// ModuleName, ChildPath and BlockPath are the one place this is decided:
// the lowering, pipeline stages, FSDP's units, validation errors and
// describe() all name modules through them.

// ModuleName is the name layer l adds to its parent's path; "" for an
// unnamed Sequential or Residual.
func ModuleName(l Layer) string {
	if n := l.Label(); n != "" {
		return n
	}
	if d, ok := l.(DefaultNamer); ok {
		return d.DefaultName()
	}
	return l.Kind()
}

// DefaultNamer is a layer whose unnamed module is not called by its kind:
// an attention is "attn"; containers that only say how a block is written
// (sequential, residual, parallel branches) give "" and add nothing.
type DefaultNamer interface {
	DefaultName() string
}

// ChildPath is the path of child c of the layer of at path parent: parent
// with c's module name, after the blocks' index range ("layers.0-31") when
// of is a repeat.
func ChildPath(parent string, of, c Layer) string {
	if r, ok := of.(*Repeat); ok {
		var buf [24]byte // "0-" and the last index, for a repeat of one layer
		blocks := append(buf[:0], '0')
		switch {
		case r.Blocks != nil:
			blocks = append(blocks[:0], indexRanges(r.indices(c))...)
		case r.N > 1:
			blocks = strconv.AppendInt(append(blocks, '-'), r.N-1, 10)
		}
		return joinPath(parent, blocks, ModuleName(c))
	}
	return JoinName(parent, ModuleName(c))
}

// joinPath is JoinName(JoinName(a, string(b)), c) in one allocation
// (Plan.Validate builds a path for every layer of the model, at every
// layout a search enumerates).
func joinPath(a string, b []byte, c string) string {
	var s strings.Builder
	s.Grow(len(a) + len(b) + len(c) + 2)
	dot := func() {
		if s.Len() > 0 {
			s.WriteByte('.')
		}
	}
	if a != "" {
		s.WriteString(a)
	}
	if len(b) > 0 {
		dot()
		s.Write(b)
	}
	if c != "" {
		dot()
		s.WriteString(c)
	}
	return s.String()
}

// Walk calls fn for l and every layer below it, depth first, with its
// path: "layers.0-31.self_attn".
func Walk(l Layer, path string, fn func(path string, l Layer)) {
	fn(path, l)
	for _, c := range l.Children() {
		Walk(c, ChildPath(path, l, c), fn)
	}
}

func Itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var buf [24]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return string(buf[i:])
}

// indexRanges writes ascending indices as ranges: "0-2,5,7-9".
func indexRanges(ix []int64) string {
	var s strings.Builder
	ranges := 0
	for i := 0; i < len(ix); {
		j := i
		for j+1 < len(ix) && ix[j+1] == ix[j]+1 {
			j++
		}
		if ranges == maxPathRanges {
			s.WriteString(",...") // a path names a layer, it need not list a million blocks
			break
		}
		if ranges > 0 {
			s.WriteByte(',')
		}
		s.WriteString(Itoa(ix[i]))
		if j > i {
			s.WriteString("-" + Itoa(ix[j]))
		}
		ranges++
		i = j + 1
	}
	return s.String()
}

// maxPathRanges bounds the index ranges a module path lists for a layer
// shared by blocks that are not contiguous (Gemma 3's local layers: 0-4,
// 6-10, ...), so that a config with a million layers builds short paths
// in linear time rather than megabyte paths in quadratic time.
const maxPathRanges = 64

// JoinName joins two module paths, either of which may be empty.
func JoinName(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

func Positive(path, what string, n int64) error {
	if n <= 0 {
		return units.Errorf(path, "%s must be positive (got %d)", what, n)
	}
	return nil
}
