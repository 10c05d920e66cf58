package sim

import "fmt"

// Linear is nn.Linear(in, out, bias).
type Linear struct {
	Name     string
	In, Out  int64
	Bias     bool
	Role     string // q k v o gate up down lm_head ... (LoRA targets)
	Dropout  float64
	Activate string // optional activation after the matmul
}

func (l *Linear) Kind() string      { return "linear" }
func (l *Linear) Label() string     { return l.Name }
func (l *Linear) Children() []Layer { return nil }
func (l *Linear) Params() int64 {
	n := l.In * l.Out
	if l.Bias {
		n += l.Out
	}
	return n
}
func (l *Linear) Summary() string { return fmt.Sprintf("%d -> %d", l.In, l.Out) }
func (l *Linear) validate(path string) error {
	if err := positive(path, "in_features", l.In); err != nil {
		return err
	}
	return positive(path, "out_features", l.Out)
}
func (l *Linear) lower(b *builder, x Value) Value {
	if b.last(x) != l.In {
		panic(shapeMismatch(b, "linear", l.In, b.last(x)))
	}
	name := l.Name
	if name == "" {
		name = "linear"
	}
	role := l.Role
	if role == "" {
		role = "linear"
	}
	return b.linear(name, role, x, l.In, l.Out, l.Bias)
}

// shapeMismatch is raised (as a panic caught by Lower) when layers do not chain.
type lowerError struct{ err *Error }

func shapeMismatch(b *builder, kind string, want, got int64) lowerError {
	return lowerError{errorf(b.name(""), "%s expects inputs with %d features but the previous layer gives %d", kind, want, got)}
}

// Embedding is nn.Embedding(rows, dim): a gather of rows. It saves only the
// int64 indices; its gradient is dense (rows x dim).
type Embedding struct {
	Name      string
	Rows, Dim int64
}

func (e *Embedding) Kind() string      { return "embedding" }
func (e *Embedding) Label() string     { return e.Name }
func (e *Embedding) Children() []Layer { return nil }
func (e *Embedding) Params() int64     { return e.Rows * e.Dim }
func (e *Embedding) Summary() string   { return fmt.Sprintf("%d x %d", e.Rows, e.Dim) }
func (e *Embedding) validate(path string) error {
	if err := positive(path, "rows", e.Rows); err != nil {
		return err
	}
	if err := checkVocab(path, "rows", e.Rows); err != nil { // checked.go
		return err
	}
	return positive(path, "dim", e.Dim)
}
func (e *Embedding) lower(b *builder, x Value) Value {
	name := e.Name
	if name == "" {
		name = "embed"
	}
	if b.par.tpn() > 1 {
		return b.vocabParallelEmbedding(e, name, x) // tp.go
	}
	defer b.scope(name)()
	w := b.param("weight", []int64{e.Rows, e.Dim}, "embed")
	i := b.addOp("embedding", "", []Value{x}, w)
	s := b.shape(x)
	if b.dtype(x) != INT64 {
		s = s[:len(s)-1]
	}
	y := b.out(i, "out", append(append([]int64(nil), s...), e.Dim), b.prec.Params, "embedding lookup output")
	b.save(i, x)
	b.op(i).noGradB = true
	return y
}

// Norm is layernorm(dim, bias) or rmsnorm(dim).
type Norm struct {
	Name string
	Dim  int64
	RMS  bool
	Bias bool
}

func (n *Norm) Kind() string {
	if n.RMS {
		return "rmsnorm"
	}
	return "layernorm"
}
func (n *Norm) Label() string     { return n.Name }
func (n *Norm) Children() []Layer { return nil }
func (n *Norm) Params() int64 {
	if n.Bias && !n.RMS {
		return 2 * n.Dim
	}
	return n.Dim
}
func (n *Norm) Summary() string            { return fmt.Sprintf("%d", n.Dim) }
func (n *Norm) validate(path string) error { return positive(path, "dim", n.Dim) }
func (n *Norm) lower(b *builder, x Value) Value {
	if b.last(x) != n.Dim {
		panic(shapeMismatch(b, n.Kind(), n.Dim, b.last(x)))
	}
	name := n.Name
	if name == "" {
		name = "norm"
	}
	if n.RMS {
		return b.rmsNorm(name, x, n.Dim)
	}
	return b.layerNorm(name, x, n.Dim, n.Bias)
}

// Dropout is nn.Dropout(p).
type Dropout struct {
	Name string
	P    float64
}

func (d *Dropout) Kind() string      { return "dropout" }
func (d *Dropout) Label() string     { return d.Name }
func (d *Dropout) Children() []Layer { return nil }
func (d *Dropout) Params() int64     { return 0 }
func (d *Dropout) Summary() string   { return fmt.Sprintf("p=%g", d.P) }
func (d *Dropout) validate(path string) error {
	if d.P < 0 || d.P >= 1 {
		return errorf(path, "dropout probability must be in [0, 1) (got %g)", d.P)
	}
	return nil
}
func (d *Dropout) lower(b *builder, x Value) Value { return b.dropout("dropout", x, d.P) }

// Act is an elementwise activation: gelu, relu, silu, tanh, sigmoid.
type Act struct {
	Name string
	Fn   string
}

func (a *Act) Kind() string      { return "act" }
func (a *Act) Label() string     { return a.Name }
func (a *Act) Children() []Layer { return nil }
func (a *Act) Params() int64     { return 0 }
func (a *Act) Summary() string   { return a.Fn }
func (a *Act) validate(path string) error {
	switch a.Fn {
	case "gelu", "relu", "silu", "tanh", "sigmoid":
		return nil
	}
	return errorf(path, "unknown activation %q (known: gelu, relu, silu, tanh, sigmoid)", a.Fn)
}
func (a *Act) lower(b *builder, x Value) Value { return b.activation(a.Fn, x) }

// activation lowers one activation function with its autograd saves.
func (b *builder) activation(fn string, x Value) Value {
	switch fn {
	case "relu", "sigmoid", "tanh":
		return b.unary(fn, x, false, true)
	default: // gelu, silu save their input
		return b.unary(fn, x, true, false)
	}
}
