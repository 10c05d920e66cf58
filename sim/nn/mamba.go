package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Mamba is the Mamba (Mamba-1) mixer of Jamba (Lieber et al. 2024,
// arXiv:2403.19887) as transformers' JambaMambaMixer trains it with the
// kernels (cuda_kernels_forward; the fused mamba_inner_fn cannot run
// because of the RMS norms on dt, B and C, so every step is its own op):
//
//	xz = in_proj(h)                         # [T, 2*inner]; x, z its halves (views)
//	u = causal_conv1d_fn(x, conv1d, silu)   # saves x: in_proj's whole output stays
//	dt, B, C = split(x_proj(u))             # u transposed: the linear copies it
//	dt, B, C = dt_layernorm(dt), b_layernorm(B), c_layernorm(C)
//	delta = dt_proj(dt)                     # the bias added inside the scan
//	y = selective_scan_fn(u, delta, -exp(A_log), B, C, D, z, dt_bias, softplus)
//	out = out_proj(y)                       # y transposed: the linear copies it
//
// SelectiveScanFn (mamba_ssm selective_scan_interface.py) makes delta, B,
// C and z contiguous (each is a transposed view) and saves u, those
// copies, A, D, the bias, the scan's chunk states (fp32, [batch, inner,
// ceil(L/2048), 2*state]: one per 2,048-token chunk) and its output
// before the gate. Everything else it keeps is per token: no [seq, seq]
// term, as in Mamba-2 (mamba2.go).
type Mamba struct {
	Name     string
	Dim      int64 // hidden_size
	Inner    int64 // mamba_expand * hidden_size
	State    int64 // mamba_d_state
	ConvK    int64 // mamba_d_conv
	DTRank   int64 // mamba_dt_rank
	Bias     bool  // mamba_proj_bias: in_proj and out_proj
	ConvBias bool  // mamba_conv_bias
	// Impl is how the mixer runs (mamba1.go): "jamba" (the default, with
	// the dt, B and C norms), "fused" (MambaMixer through mamba_inner_fn)
	// or "slow" (MambaMixer's PyTorch path).
	Impl string
	// SkipFP32 is the slow path from transformers 5.15: the scan takes
	// D.float(), so the skip u x D, its sum with the scan output and the
	// gated product run in fp32 (cast back before out_proj); before it
	// the skip ran in the activations' dtype (mamba1.go, lowerSlow).
	SkipFP32 bool
	// WeightlessNorms is FalconMambaMixer's slow path: x_proj's dt, B and
	// C columns each through an RMS norm without a weight
	// (FalconMambaWeightlessRMSNorm; its all-ones "weight" is a
	// non-persistent buffer the forward never reads) before dt_proj and
	// the scan (mamba1.go, lowerSlow). Impl must be "slow".
	WeightlessNorms bool
}

// sequences reads an input of shape s as tokens rows of batch sequences
// of seq tokens ([batch, seq, dim]; a 2-D input is one sequence).
func sequences(s []int64) (tokens, seq, batch int64) {
	tokens, seq = core.Rows(s), core.Rows(s)
	if len(s) >= 3 {
		seq = s[len(s)-2]
	}
	return tokens, seq, tokens / max(seq, 1)
}

// mambaScanChunk is the tokens per chunk of selective_scan_fwd's saved
// states (mamba_ssm csrc/selective_scan: kChunkSize 2048).
const mambaScanChunk = 2048

func (m *Mamba) Kind() string           { return "mamba" }
func (m *Mamba) Label() string          { return m.Name }
func (m *Mamba) DefaultName() string    { return "mamba" }
func (m *Mamba) Children() []core.Layer { return nil }
func (m *Mamba) InDim() int64           { return m.Dim }
func (m *Mamba) OutDim() int64          { return m.Dim }

func (m *Mamba) xProj() int64 { return m.DTRank + 2*m.State }

// Params: in_proj, conv1d, x_proj, dt_proj (with its bias), A_log, D,
// out_proj, and Jamba's three inner norms.
func (m *Mamba) Params() int64 {
	n := m.Dim*2*m.Inner + m.Inner*m.ConvK + m.Inner*m.xProj() + m.DTRank*m.Inner + m.Inner +
		m.Inner*m.State + m.Inner + m.Inner*m.Dim
	if m.norms() {
		n += m.DTRank + 2*m.State
	}
	if m.Bias {
		n += 2*m.Inner + m.Dim
	}
	if m.ConvBias {
		n += m.Inner
	}
	return n
}

func (m *Mamba) Summary() string {
	s := fmt.Sprintf("dim %d, inner %d, state %d, dt rank %d, conv %d", m.Dim, m.Inner, m.State, m.DTRank, m.ConvK)
	if !m.norms() {
		s += ", " + m.Impl
	}
	return s
}

func (m *Mamba) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, m.Dim}, sized{FieldInner, m.Inner}, sized{FieldState, m.State},
		sized{FieldConvKernel, m.ConvK}, sized{FieldDTRank, m.DTRank}); err != nil {
		return err
	}
	switch m.Impl {
	case "", MambaJamba, MambaFused, MambaSlow:
	default:
		return fieldErr(path, "unknown ", FieldMambaImpl, fmt.Sprintf(" %q (known: jamba, fused, slow)", m.Impl))
	}
	if m.WeightlessNorms && m.Impl != MambaSlow {
		return fieldErr(path, "weightless dt, B and C norms need ", FieldMambaImpl, fmt.Sprintf(" \"slow\" (got %q)", m.Impl))
	}
	return nil
}

// CheckLayout: tensor and context parallelism of Mamba layers are not
// modelled (under cp the scan would run on each rank's tokens alone: no
// state passing, no all-to-all).
func (m *Mamba) CheckLayout(path string, par core.Parallelism) error {
	return recurrentLayout(path, par, "Mamba", "the scan would run on each rank's tokens alone, with no exchange")
}

func (m *Mamba) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "mamba", m.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(m))()
	s := b.Shape(x)
	T, L, batch := sequences(s)
	switch m.Impl {
	case MambaFused:
		return m.lowerFused(b, x, batch, L)
	case MambaSlow:
		return m.lowerSlow(b, x, batch, L)
	}
	xz := b.Linear("in_proj", core.RoleLinear, x, m.Dim, 2*m.Inner, m.Bias)
	dt := b.Dtype(xz)

	// causal_conv1d_fn over the x half with silu: saves its input, a view
	// that keeps in_proj's whole output.
	done := b.Scope("conv1d")
	ps := []int32{b.Param("weight", []int64{m.Inner, 1, m.ConvK}, core.RoleLinear)}
	if m.ConvBias {
		ps = append(ps, b.Param("bias", []int64{m.Inner}, core.RoleLinear))
	}
	done()
	ci := b.AddOp("conv1d", "conv1d", []core.Value{xz}, ps...)
	u := b.Out(ci, "out", core.WithLast(s, m.Inner), dt, "the causal conv1d's output after silu [batch, inner, seq]")
	b.Save(ci, xz)
	b.Op(ci).Flops = 2 * float64(T) * float64(m.Inner*m.ConvK)

	// x_proj reads u transposed: F.linear keeps a contiguous copy, or
	// with one sample u itself (transposedInput).
	uT := transposedInput(b, "x_proj_input", u, batch)
	xp := b.Linear("x_proj", core.RoleLinear, uT, m.Inner, m.xProj(), false)
	dtn := b.RmsNormSlice("dt_layernorm", xp, m.DTRank)
	bn := b.RmsNormSlice("b_layernorm", xp, m.State)
	cn := b.RmsNormSlice("c_layernorm", xp, m.State)
	delta := b.Linear("dt_proj", core.RoleLinear, dtn, m.DTRank, m.Inner, true)

	aLog := b.Param("A_log", []int64{m.Inner, m.State}, core.RoleLinear)
	d := b.Param("D", []int64{m.Inner}, core.RoleLinear)
	// A = -exp(A_log.float()): exp saves its result.
	ai := b.AddOp("exp", "A", nil, aLog)
	a := b.Out(ai, "A", []int64{m.Inner, m.State}, units.FP32, "A = -exp(A_log), fp32")
	b.Save(ai, a)

	si := b.AddOp("selective_scan", "selective_scan", []core.Value{u, delta, bn, cn, xz, a}, d)
	y := b.Out(si, "out_z", core.WithLast(s, m.Inner), dt, "the scan output times silu(z)")
	saved := []core.Value{u, a}
	for _, c := range []struct {
		name  string
		shape []int64
		dt    units.DType
		why   string
	}{
		{"delta", core.WithLast(s, m.Inner), b.Dtype(delta), "contiguous copy of delta (saved)"},
		{"B", core.WithLast(s, m.State), b.Dtype(bn), "contiguous copy of B (saved)"},
		{"C", core.WithLast(s, m.State), b.Dtype(cn), "contiguous copy of C (saved)"},
		{"z", core.WithLast(s, m.Inner), dt, "contiguous copy of the gate z (saved)"},
		{"D", []int64{m.Inner}, units.FP32, "D.float() (saved)"},
		{"delta_bias", []int64{m.Inner}, units.FP32, "dt_proj's bias, fp32 (saved)"},
		{"states", []int64{batch, m.Inner, (L + mambaScanChunk - 1) / mambaScanChunk, 2 * m.State}, units.FP32, "the scan's chunk states (saved)"},
		{"out", core.WithLast(s, m.Inner), dt, "the scan output before the gate (saved)"},
	} {
		v := b.Out(si, c.name, c.shape, c.dt, c.why)
		b.Val(v).Grad = false
		saved = append(saved, v)
	}
	b.Save(si, saved...)
	// The recurrence of slow_forward per (token, inner, state) element:
	// exp(A*dt) (2), dt*B (1), times u (1), the state update (2), the
	// product with C (2); then D*u, the gate and its silu per (token, inner).
	b.Op(si).Flops = 8*float64(T)*float64(m.Inner*m.State) + 6*float64(T)*float64(m.Inner)
	// Backward: dB and dC accumulate in fp32 (selective_scan_bwd).
	b.Op(si).WorkB = 2 * units.FP32.Bytes(T*m.State)

	// out_proj reads y transposed: a copy, or y itself (transposedInput).
	yT := transposedInput(b, "out_proj_input", y, batch)
	return b.Linear("out_proj", core.RoleLinear, yT, m.Inner, m.Dim, m.Bias)
}
