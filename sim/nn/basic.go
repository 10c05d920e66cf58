package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Linear is nn.Linear(in, out, bias).
type Linear struct {
	Name     string
	In, Out  int64
	Bias     bool
	Role     core.Role // q k v o gate up down lm_head ... (LoRA targets)
	Dropout  float64
	Activate string // optional activation after the matmul
}

func (l *Linear) Kind() string           { return "linear" }
func (l *Linear) Label() string          { return l.Name }
func (l *Linear) Children() []core.Layer { return nil }
func (l *Linear) Params() int64 {
	n := l.In * l.Out
	if l.Bias {
		n += l.Out
	}
	return n
}
func (l *Linear) Summary() string { return fmt.Sprintf("%d -> %d", l.In, l.Out) }
func (l *Linear) Validate(path string) error {
	if err := core.Positive(path, "in_features", l.In); err != nil {
		return err
	}
	return core.Positive(path, "out_features", l.Out)
}
func (l *Linear) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != l.In {
		panic(core.ShapeMismatch(b, "linear", l.In, b.Last(x)))
	}
	name := b.ModuleName(l)
	role := l.Role
	if role == "" {
		role = core.RoleLinear
	}
	return b.Linear(name, role, x, l.In, l.Out, l.Bias)
}

// Embedding is nn.Embedding(rows, dim): a gather of rows. It saves only the
// int64 indices; its gradient is dense (rows x dim).
type Embedding struct {
	Name      string
	Rows, Dim int64
}

func (e *Embedding) Kind() string           { return "embedding" }
func (e *Embedding) Label() string          { return e.Name }
func (e *Embedding) DefaultName() string    { return "embed" }
func (e *Embedding) Children() []core.Layer { return nil }
func (e *Embedding) Params() int64          { return e.Rows * e.Dim }
func (e *Embedding) Summary() string        { return fmt.Sprintf("%d x %d", e.Rows, e.Dim) }
func (e *Embedding) Validate(path string) error {
	if err := core.Positive(path, "rows", e.Rows); err != nil {
		return err
	}
	if err := core.CheckVocab(path, "rows", e.Rows); err != nil {
		return err
	}
	return core.Positive(path, "dim", e.Dim)
}
func (e *Embedding) Lower(b *core.Builder, x core.Value) core.Value {
	name := b.ModuleName(e)
	if b.Par.Tpn() > 1 {
		y := vocabParallelEmbedding(b, e, name, x)
		b.EmbeddingOutput(y)
		return y
	}
	defer b.Scope(name)()
	w := b.Param("weight", []int64{e.Rows, e.Dim}, core.RoleEmbed)
	i := b.AddOp("embedding", "", []core.Value{x}, w)
	s := b.Shape(x)
	if b.Dtype(x) != units.INT64 {
		s = s[:len(s)-1]
	}
	y := b.Out(i, "out", append(append([]int64(nil), s...), e.Dim), b.Prec.Params, "embedding lookup output")
	b.Save(i, x)
	b.Op(i).NoGradB = true
	b.EmbeddingOutput(y)
	return y
}

// Norm is layernorm(dim, bias) or rmsnorm(dim).
type Norm struct {
	Name string
	Dim  int64
	RMS  bool
	Bias bool
	// WeightFP32 (RMS only): the norm runs in fp32 and the weight, cast
	// to fp32, multiplies the fp32 rows before the cast back,
	// (weight.to(torch.float32) * y).to(input_dtype) (NemotronHRMSNorm from
	// transformers 5.18, modeling_nemotron_h.py l.742 at 5.25.0): in a
	// 16-bit model the product keeps the fp32 rows and the weight's fp32
	// copy where Llama's keeps 16-bit rows. Fused kernels (Liger,
	// Transformer Engine) replace it as they replace Llama's.
	WeightFP32 bool
	// OnePlus (LayerNorm only): layer_norm weighted by weight + 1.0, a
	// new tensor it saves (Nemotron's NemotronLayerNorm1P,
	// core.Builder.LayerNormOnePlus).
	OnePlus bool
}

func (n *Norm) Kind() string {
	if n.RMS {
		return "rmsnorm"
	}
	return "layernorm"
}
func (n *Norm) Label() string          { return n.Name }
func (n *Norm) DefaultName() string    { return "norm" }
func (n *Norm) Children() []core.Layer { return nil }
func (n *Norm) Params() int64 {
	if n.Bias && !n.RMS {
		return 2 * n.Dim
	}
	return n.Dim
}
func (n *Norm) Summary() string            { return fmt.Sprintf("%d", n.Dim) }
func (n *Norm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }
func (n *Norm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, n.Kind(), n.Dim, b.Last(x)))
	}
	name := b.ModuleName(n)
	if n.RMS && n.WeightFP32 && !b.RMSNormFused() {
		return fp32RMSNorm(b, name, x, n.Dim, normWeightFloat, "NemotronHRMSNorm")
	}
	if n.RMS {
		return b.RmsNorm(name, x, n.Dim)
	}
	if n.OnePlus {
		return b.LayerNormOnePlus(name, x, n.Dim, n.Bias)
	}
	return b.LayerNorm(name, x, n.Dim, n.Bias)
}

// Dropout is nn.Dropout(p).
type Dropout struct {
	Name string
	P    float64
}

func (d *Dropout) Kind() string           { return "dropout" }
func (d *Dropout) Label() string          { return d.Name }
func (d *Dropout) Children() []core.Layer { return nil }
func (d *Dropout) Params() int64          { return 0 }
func (d *Dropout) Summary() string        { return fmt.Sprintf("p=%g", d.P) }
func (d *Dropout) Validate(path string) error {
	if d.P < 0 || d.P >= 1 {
		return units.Errorf(path, "dropout probability must be in [0, 1) (got %g)", d.P)
	}
	return nil
}
func (d *Dropout) Lower(b *core.Builder, x core.Value) core.Value {
	return b.Dropout("dropout", x, d.P)
}

// DefaultName: an unnamed dropout is no module (nn.functional.dropout,
// OPTDecoderLayer's); it runs in its parent's scope either way.
func (d *Dropout) DefaultName() string { return "" }

// Act is an elementwise activation: gelu, relu, silu, tanh, sigmoid.
type Act struct {
	Name string
	Fn   string
}

func (a *Act) Kind() string           { return "act" }
func (a *Act) Label() string          { return a.Name }
func (a *Act) Children() []core.Layer { return nil }
func (a *Act) Params() int64          { return 0 }
func (a *Act) Summary() string        { return a.Fn }
func (a *Act) Validate(path string) error {
	switch a.Fn {
	case "gelu", "relu", "silu", "tanh", "sigmoid", "gelu_new", "gelu_fast", "gelu_python", "quick_gelu":
		return nil
	}
	return units.Errorf(path, "unknown activation %q (known: gelu, relu, silu, tanh, sigmoid, gelu_new, gelu_fast, gelu_python, quick_gelu)", a.Fn)
}
func (a *Act) Lower(b *core.Builder, x core.Value) core.Value { return Activation(b, a.Fn, x) }

// DefaultName: an unnamed activation is no module (a functional call,
// RobertaLMHead's gelu(x)); it runs in its parent's scope either way.
func (a *Act) DefaultName() string { return "" }

// activation lowers one activation function with its autograd saves.
func Activation(b *core.Builder, fn string, x core.Value) core.Value {
	switch fn {
	case "relu", "sigmoid", "tanh":
		return b.Unary(fn, x, false, true)
	case "relu2": // squared ReLU (Nemotron-H): relu saves its output, pow(2) its input, the same tensor
		r := b.Unary("relu", x, false, true)
		return b.Unary("pow", r, true, false)
	case "gelu_new", "gelu_fast", "gelu_python", "quick_gelu":
		return pythonGELU(b, fn, x)
	case "xielu": // Apertus's, with its two scalars (xielu.go)
		return xielu(b, x)
	default: // gelu, silu save their input
		return b.Unary(fn, x, true, false)
	}
}

// vocabParallelEmbedding is Megatron's VocabParallelEmbedding: this rank
// holds rows/tp rows; token ids outside its range are shifted and masked
// (the lookup saves the shifted ids, the masking the bool mask), the
// partial lookups are all-reduced, or reduce-scattered with SP.
func vocabParallelEmbedding(b *core.Builder, e *Embedding, name string, x core.Value) core.Value {
	defer b.Scope(name)()
	tp := b.Par.Tp
	w := b.Param("weight", []int64{e.Rows / tp, e.Dim}, core.RoleEmbed)
	b.ShardParam(w, e.Rows*e.Dim)
	s := b.Shape(x)
	if b.Dtype(x) != units.INT64 {
		s = s[:len(s)-1]
	}
	m := b.AddOp("vocab_mask", "mask", []core.Value{x})
	ids := b.Out(m, "masked_input", s, units.INT64, "token ids shifted into this rank's vocabulary shard (saved by the lookup)")
	mask := b.Out(m, "input_mask", s, units.BOOL, "tokens outside this rank's vocabulary shard (saved by the masking)")
	b.Op(m).NoGradB = true
	i := b.AddOp("embedding", "", []core.Value{ids, mask}, w)
	y := b.Out(i, "out", append(append([]int64(nil), s...), e.Dim), b.Prec.Params, "embedding lookup output (rows of this rank's vocabulary shard)")
	b.Save(i, ids, mask)
	b.Op(i).NoGradB = true
	return b.TpReduce("reduce", y)
}

func (l *Linear) InDim() int64  { return l.In }
func (l *Linear) OutDim() int64 { return l.Out }

func (e *Embedding) OutDim() int64 { return e.Dim }

// LookupShape is the table's [rows, dim] (TokenLookup).
func (e *Embedding) LookupShape() (rows, dim int64) { return e.Rows, e.Dim }

func (n *Norm) InDim() int64  { return n.Dim }
func (n *Norm) OutDim() int64 { return n.Dim }
