package host

import (
	"strings"

	"go.starlark.net/starlark"
)

// BuiltinFunc is the Go signature of a builtin function.
type BuiltinFunc func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)

// Builtin is one predeclared name with its documentation.
type Builtin struct {
	Name  string         // "gpu", or "optim.adamw" (the dot makes a module member)
	Sig   string         // "gpu(name, memory=None, ...)"; starts with Name
	Doc   string         // first sentence: the one-line summary
	Fn    BuiltinFunc    // a function; or
	Value starlark.Value // a constant or module value (immutable)
}

// Summary is the first sentence of Doc.
func (b Builtin) Summary() string {
	d := strings.TrimSpace(b.Doc)
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	if i := strings.IndexByte(d, '\n'); i >= 0 {
		d = d[:i]
	}
	return d
}
