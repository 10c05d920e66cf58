package core

import "github.com/memsh/memsh/sim/units"

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
// checks that the layout's degrees divide it.
type LayoutChecker interface {
	CheckLayout(path string, par Parallelism) error
}

// ExpertLayer is a layer of experts that expert parallelism spreads.
type ExpertLayer interface {
	ExpertCount() int64
}

// PackingChecker is a layer that cannot run on packed documents (one row
// of several sequences) as it is configured; CheckPacking says why.
type PackingChecker interface {
	CheckPacking(path string) error
}

// Walk calls fn for l and every layer below it, depth first, with a path
// like "layers[2].attn".
func Walk(l Layer, path string, fn func(path string, l Layer)) {
	fn(path, l)
	for i, c := range l.Children() {
		Walk(c, ChildPath(path, c, i), fn)
	}
}

func ChildPath(parent string, c Layer, i int) string {
	name := c.Label()
	if name == "" {
		name = c.Kind() + "[" + Itoa(int64(i)) + "]"
	}
	if parent == "" {
		return name
	}
	return parent + "." + name
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

func joinName(a, b string) string {
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
