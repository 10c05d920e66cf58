package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MLP is the transformer feed-forward block: fc1, activation, fc2 for
// gelu/relu/silu; gate, up, act(gate)*up, down for swiglu/geglu.
type MLP struct {
	Name    string
	Dim     int64
	Hidden  int64
	Act     string // gelu relu silu swiglu geglu
	Bias    bool
	Dropout float64
	// InName and OutName name an ungated MLP's two projections; "" = fc1
	// and fc2 (Starcoder2MLP: c_fc and c_proj). A gated MLP's are its up
	// and down projections and GateName its gate; "" = up_proj, down_proj
	// and gate_proj (Lfm2MLP: w3, w2 and w1).
	InName, OutName, GateName string
	// Sparsity (a gated MLP's): Gemma 3n's activation sparsity, the
	// fraction of each row of the gate the Gaussian top-k zeroes before
	// the activation (Gemma3nTextMLP._gaussian_topk, gaussianTopK); 0:
	// none.
	Sparsity float64
	// FusedName: a gated MLP's gate and up projections are one, named so,
	// 2 x Hidden wide, whose first half is activated and times the second
	// (ModernBertMLP's Wi: input, gate = Wi(x).chunk(2); Wo(act(input) *
	// gate)). Both halves are views of its output: the activation and the
	// product save that one storage.
	FusedName string
	// ClampedGLU (with FusedName, Act swiglu): the gated halves go through
	// gpt-oss's clamped GLU instead of silu(gate) * up (MiniMax M3's
	// MiniMaxM3VLDenseMLP; mlp_clamped.go).
	ClampedGLU bool
	// OutModule: an ungated MLP's second projection and the dropout after
	// it belong to a sibling module of that name, Name holding the first
	// projection and the activation (BertIntermediate and BertOutput:
	// intermediate.dense, output.dense); "" = both in Name.
	OutModule string
	// Inline: the MLP is no module of its own, its projections its
	// parent's (OPTDecoderLayer's fc1 and fc2); Name must be empty.
	Inline bool
}

// DefaultName is "mlp", or none when Inline.
func (m *MLP) DefaultName() string {
	if m.Inline {
		return ""
	}
	return "mlp"
}

func (m *MLP) gated() bool { return m.Act == "swiglu" || m.Act == "geglu" }

func (m *MLP) Kind() string           { return "mlp" }
func (m *MLP) Label() string          { return m.Name }
func (m *MLP) Children() []core.Layer { return nil }
func (m *MLP) Params() int64 {
	if m.gated() {
		n := 3 * m.Dim * m.Hidden
		if m.Bias {
			n += 2*m.Hidden + m.Dim
		}
		return n
	}
	n := 2 * m.Dim * m.Hidden
	if m.Bias {
		n += m.Hidden + m.Dim
	}
	if m.Act == "xielu" {
		n += 2 // act_fn's alpha_p and alpha_n (xielu)
	}
	return n
}
func (m *MLP) Summary() string {
	return fmt.Sprintf("%d -> %d -> %d, %s", m.Dim, m.Hidden, m.Dim, m.Act)
}
func (m *MLP) Validate(path string) error {
	if err := core.Positive(path, "dim", m.Dim); err != nil {
		return err
	}
	if err := core.Positive(path, "hidden", m.Hidden); err != nil {
		return err
	}
	switch m.Act {
	case "gelu", "relu", "relu2", "silu", "swiglu", "geglu", "tanh", "sigmoid", "gelu_new", "gelu_fast", "gelu_python", "quick_gelu", "xielu":
	default:
		return units.Errorf(path, "unknown mlp activation %q (known: gelu, relu, relu2, silu, swiglu, geglu, gelu_new, gelu_fast, gelu_python, quick_gelu, xielu)", m.Act)
	}
	if m.Dropout < 0 || m.Dropout >= 1 {
		return units.Errorf(path, "dropout must be in [0, 1) (got %g)", m.Dropout)
	}
	if m.Inline && m.Name != "" {
		return units.Errorf(path, "an inline MLP has no module, so no name (got %q)", m.Name)
	}
	if m.OutModule != "" && m.gated() {
		return units.Errorf(path, "a separate output module is modelled for an ungated MLP only (got %s)", m.Act)
	}
	if m.ClampedGLU && (m.FusedName == "" || m.Act != "swiglu") {
		return units.Errorf(path, "the clamped GLU is modelled for a fused swiglu gate_up projection only (got %q, %s)", m.FusedName, m.Act)
	}
	if m.Sparsity < 0 || m.Sparsity >= 1 || m.Sparsity > 0 && !m.gated() {
		return units.Errorf(path, "activation sparsity must be in [0, 1), of a gated MLP (got %g, %s)", m.Sparsity, m.Act)
	}
	return nil
}

func (m *MLP) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "mlp", m.Dim, b.Last(x)))
	}
	name := b.ModuleName(m)
	if m.OutModule != "" {
		closeIn := b.Scope(name)
		xg, hl := b.TpGatherFP8(x), m.Hidden/b.Par.Tpn()
		h := ffnIn(b, x, xg, m.Dim, m.Hidden, hl, m.Act, m.Bias, m.InName)
		closeIn()
		defer b.Scope(m.OutModule)()
		return b.Dropout("dropout", ffnOut(b, h, m.Dim, m.Hidden, hl, m.Bias, m.OutName), m.Dropout)
	}
	defer b.Scope(name)()
	y := ffn(b, x, m.Dim, m.Hidden, m.Act, m.Bias, mlpNames{m.GateName, m.InName, m.OutName, m.FusedName, m.Sparsity, m.ClampedGLU})
	return b.Dropout("dropout", y, m.Dropout)
}

// Ffn lowers the feed-forward core (an ungated one's projections fc1 and
// fc2, a gated one's gate_proj, up_proj and down_proj).
func Ffn(b *core.Builder, x core.Value, dim, hidden int64, act string, bias bool) core.Value {
	return ffn(b, x, dim, hidden, act, bias, mlpNames{})
}

// mlpNames are an MLP's projection names (MLP.GateName, InName, OutName,
// FusedName; "" the default of its kind) and its gate's sparsity
// (MLP.Sparsity).
type mlpNames struct {
	gate, in, out, fused string
	sparsity             float64
	clamped              bool // fused halves through clampedGLU (MLP.ClampedGLU)
}

func nameOr(name, def string) string {
	if name == "" {
		return def
	}
	return name
}

// ffn is Ffn with the projections named.
func ffn(b *core.Builder, x core.Value, dim, hidden int64, act string, bias bool, n mlpNames) core.Value {
	// core/tp.go: column-parallel up projections over the (SP-gathered) input,
	// row-parallel down projection; hidden/tp on each rank.
	xg, hl := b.TpGatherFP8(x), hidden/b.Par.Tpn() // in fp8 for TE fp8 linears
	if act == "swiglu" || act == "geglu" {
		fn := "silu"
		if act == "geglu" {
			fn = "gelu"
		}
		if n.fused != "" && n.clamped {
			return fusedClampedGLU(b, x, xg, dim, hidden, hl, bias, n)
		}
		if n.fused != "" {
			return fusedGLU(b, x, xg, dim, hidden, hl, fn, bias, n)
		}
		gate := b.ColLinear(nameOr(n.gate, "gate_proj"), core.RoleGate, x, xg, dim, hidden, hl, bias)
		if n.sparsity > 0 {
			gate = gaussianTopK(b, gate)
		}
		up := b.ColLinear(nameOr(n.in, "up_proj"), core.RoleUp, x, xg, dim, hidden, hl, bias)
		var h core.Value
		switch {
		case fn == "silu" && b.LigerSwiGLU():
			h = b.LigerSiLUMul(gate, up)
		case b.MegatronKernels():
			h = b.FusedGLU(fn, gate, up, core.NoValue)
		default:
			h = b.Mul("act_mul", Activation(b, fn, gate), up)
		}
		return b.RowLinear(nameOr(n.out, "down_proj"), core.RoleDown, h, hidden, hl, dim, bias)
	}
	return ffnOut(b, ffnIn(b, x, xg, dim, hidden, hl, act, bias, n.in), dim, hidden, hl, bias, n.out)
}

// ffnIn is an ungated MLP's first projection (name, "" = fc1) and its
// activation.
func ffnIn(b *core.Builder, x, xg core.Value, dim, hidden, hl int64, act string, bias bool, name string) core.Value {
	h := b.ColLinear(nameOr(name, "fc1"), core.RoleUp, x, xg, dim, hidden, hl, bias)
	return Activation(b, act, h)
}

// ffnOut is an ungated MLP's second projection (name, "" = fc2).
func ffnOut(b *core.Builder, h core.Value, dim, hidden, hl int64, bias bool, name string) core.Value {
	return b.RowLinear(nameOr(name, "fc2"), core.RoleDown, h, hidden, hl, dim, bias)
}

// fusedGLU is a gated MLP whose gate and up projections are one
// (MLP.FusedName): act(first half) * second half, both views of its
// output, which the activation and the product save once.
func fusedGLU(b *core.Builder, x, xg core.Value, dim, hidden, hl int64, fn string, bias bool, n mlpNames) core.Value {
	wi := b.ColLinear(n.fused, core.RoleUp, x, xg, dim, 2*hidden, 2*hl, bias)
	half := core.WithLast(b.Shape(wi), hl)
	dt := b.Dtype(wi)
	i := b.AddOp(fn, fn, []core.Value{wi})
	act := b.Out(i, fn, half, dt, "output of "+fn+" on the projection's first half")
	b.Save(i, wi)          // its input, a view of the projection's output
	b.Op(i).Strided = true // the halves' rows are 2 x hidden apart (timing/strided.go)
	b.Op(i).Flops = 8 * float64(core.Numel(half))
	b.Op(i).Bytes += float64(dt.Bytes(core.Numel(half)))
	j := b.AddOp("mul", "act_mul", []core.Value{act, wi})
	h := b.Out(j, "act_mul", half, dt, "the activated half times the other")
	b.Op(j).Strided = true // up, the last input, a strided view: no broadcast
	if b.Grad(act) {
		b.Save(j, wi)
	}
	if b.Grad(wi) {
		b.Save(j, act)
	}
	b.Op(j).Flops = float64(core.Numel(half))
	b.Op(j).Bytes += float64(2 * dt.Bytes(core.Numel(half)))
	return b.RowLinear(nameOr(n.out, "down_proj"), core.RoleDown, h, hidden, hl, dim, bias)
}

func (m *MLP) InDim() int64  { return m.Dim }
func (m *MLP) OutDim() int64 { return m.Dim }

// CheckLayout checks that tensor parallelism divides the hidden size.
func (m *MLP) CheckLayout(path string, par core.Parallelism) error {
	if tp := par.TP; tp > 0 && m.Hidden%tp != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the mlp hidden size %d", tp, m.Hidden)}
	}
	return nil
}

// gaussianTopK is Gemma 3n's activation sparsity on the gate g
// (Gemma3nTextMLP._gaussian_topk, modeling_gemma3n.py l. 959-973 at
// transformers 5.25.0): with k = Normal(0, 1).icdf(sparsity) (a 0-dim
// tensor of g's dtype),
//
//	relu(g - (g.mean(-1) + g.std(-1, unbiased=False) * k))
//
// std keeps g and its result, the product k, relu its output (which the
// activation after it keeps too: one tensor).
func gaussianTopK(b *core.Builder, g core.Value) core.Value {
	s, dt := b.Shape(g), b.Dtype(g)
	row := core.WithLast(s, 1)
	mean := b.Ew("mean", "gate_mean", []core.Value{g}, row, dt, "mean of each gate row")
	i := b.AddOp("std", "gate_std", []core.Value{g})
	std := b.Out(i, "gate_std", row, dt, "standard deviation of each gate row (saved with its input)")
	b.Save(i, g, std)
	k := b.Out(b.AddOp("icdf", "std_multiplier", nil), "std_multiplier", []int64{}, dt, "Normal(0, 1).icdf(activation sparsity), a 0-dim tensor")
	cutoff := b.Add("cutoff", mean, b.Mul("std_scaled", std, k))
	d := b.Ew("sub", "gate_minus_cutoff", []core.Value{g, cutoff}, s, dt, "gate less its row's cutoff")
	return b.Unary("relu", d, false, true)
}
