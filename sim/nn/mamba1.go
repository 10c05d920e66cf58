package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Mamba.Impl is how a Mamba-1 mixer runs:
//
//   - "jamba" (the default): JambaMambaMixer with the mamba_ssm kernels,
//     RMS norms on dt, B and C, each step its own op (mamba.go);
//   - "fused": transformers' MambaMixer with the mamba_ssm kernels, which
//     trains through mamba_inner_fn (MambaInnerFn in mamba_ssm's
//     selective_scan_interface.py): one autograd node from in_proj's
//     output to out_proj's, saving xz made contiguous, x_dbl, B and C
//     (contiguous copies), A, the fp32 chunk states and the scan output
//     before the gate; checkpoint_lvl=1 recomputes the conv output and
//     delta in backward. out_proj, x_proj and dt_proj run inside it: LoRA
//     or quantization of those modules do not reach that computation;
//   - "slow": MambaMixer.slow_forward, the pure PyTorch path transformers
//     takes without the kernels: the discretized A and B*u as fp32
//     [batch, inner, seq, state] tensors, then a Python loop over the
//     tokens, whose every step saves the fp32 state (and its copy in the
//     activations' dtype for the product with C). Per token it keeps
//     about inner x state x 14 bytes in bf16: orders of magnitude more
//     than the kernels (checked to the byte on PyTorch:
//     tools/oracle/mamba1.py).
const (
	MambaJamba = "jamba"
	MambaFused = "fused"
	MambaSlow  = "slow"
)

// MambaImpls are the known values of Mamba.Impl.
var MambaImpls = []string{MambaJamba, MambaFused, MambaSlow}

// norms reports whether the mixer has Jamba's dt, B and C norms.
func (m *Mamba) norms() bool { return m.Impl == "" || m.Impl == MambaJamba }

// transposedInput is what a linear keeps of x read transposed
// (x.transpose(1, 2) of a [batch, inner, seq] tensor): F.linear folds the
// batch and sequence dimensions, a view when there is one sample, a
// contiguous copy otherwise (checked on PyTorch 2.15:
// tools/oracle/mamba1.py, batch 1 and 2).
func transposedInput(b *core.Builder, name string, x core.Value, batch int64) core.Value {
	if batch == 1 {
		return x
	}
	return b.Ew("copy", name, []core.Value{x}, b.Shape(x), b.Dtype(x), "contiguous copy of a transposed input (the linear keeps it)")
}

// product is x * y broadcast to shape: autograd saves each operand the
// other's gradient needs.
func product(b *core.Builder, name string, x, y core.Value, shape []int64, dt units.DType, why string) core.Value {
	i := b.AddOp("mul", name, []core.Value{x, y})
	out := b.Out(i, name, shape, dt, why)
	if b.Grad(x) {
		b.Save(i, y)
	}
	if b.Grad(y) {
		b.Save(i, x)
	}
	b.Op(i).Flops = float64(core.Numel(shape))
	b.Op(i).Bytes += float64(b.Val(x).Bytes+b.Val(y).Bytes) + float64(dt.Bytes(core.Numel(shape)))
	return out
}

// negA is A = -exp(A_log.float()): exp saves its result; the negation is
// a new fp32 tensor.
func (m *Mamba) negA(b *core.Builder) core.Value {
	aLog := b.Param("A_log", []int64{m.Inner, m.State}, core.RoleLinear)
	ei := b.AddOp("exp", "exp_A_log", nil, aLog)
	e := b.Out(ei, "exp_A_log", []int64{m.Inner, m.State}, units.FP32, "exp(A_log), fp32 (saved by exp)")
	b.Save(ei, e)
	ni := b.AddOp("neg", "A", []core.Value{e})
	return b.Out(ni, "A", []int64{m.Inner, m.State}, units.FP32, "A = -exp(A_log), fp32")
}

// conv registers conv1d's weight and bias.
func (m *Mamba) conv(b *core.Builder) []int32 {
	done := b.Scope("conv1d")
	defer done()
	ps := []int32{b.Param("weight", []int64{m.Inner, 1, m.ConvK}, core.RoleLinear)}
	if m.ConvBias {
		ps = append(ps, b.Param("bias", []int64{m.Inner}, core.RoleLinear))
	}
	return ps
}

// lowerSlow is MambaMixer.slow_forward in training (no cache, use_mambapy
// off), over T = batch x L tokens.
func (m *Mamba) lowerSlow(b *core.Builder, x core.Value, batch, L int64) core.Value {
	s := b.Shape(x)
	T := core.Rows(s)
	I, N := m.Inner, m.State
	xz := b.Linear("in_proj", core.RoleLinear, x, m.Dim, 2*I, m.Bias)
	dt := b.Dtype(xz)
	// conv1d pads by conv_kernel-1 on both sides; its input, the x half,
	// is a view of in_proj's output, which it keeps.
	ci := b.AddOp("conv1d", "conv1d", []core.Value{xz}, m.conv(b)...)
	c := b.Out(ci, "conv1d.out", []int64{batch, I, L + m.ConvK - 1}, dt, "conv1d output, seq + conv_kernel - 1 long")
	b.Save(ci, xz)
	b.Op(ci).Flops = 2 * float64(T) * float64(I*m.ConvK)
	// silu of its first seq positions (a view): silu keeps the whole output.
	si := b.AddOp("silu", "act", []core.Value{c})
	u := b.Out(si, "u", core.WithLast(s, I), dt, "silu of the conv output")
	b.Save(si, c)
	xp := b.Linear("x_proj", core.RoleLinear, transposedInput(b, "x_proj_input", u, batch), I, m.xProj(), false)
	// dt, B and C are views of x_proj's output, or FalconMamba's normed
	// copies of them (m.bcdt).
	ts, bs, cs := m.bcdt(b, xp)
	dtp := b.Linear("dt_proj", core.RoleLinear, ts, m.DTRank, I, true)
	dts := b.Unary("softplus", dtp, true, false)
	a := m.negA(b)
	d := b.Param("D", []int64{I}, core.RoleLinear)
	big := []int64{batch, I, L, N}
	ad := product(b, "A_dt", a, dts, big, units.FP32, "A x dt, fp32 [batch, inner, seq, state]")
	ei := b.AddOp("exp", "discrete_A", []core.Value{ad})
	dA := b.Out(ei, "discrete_A", big, units.FP32, "exp(A x dt), fp32 [batch, inner, seq, state] (saved)")
	b.Save(ei, dA)
	b.Op(ei).Flops = float64(core.Numel(big))
	bF, uF := bs, u // B.float() and u.float() are the tensors themselves in fp32
	if dt != units.FP32 {
		ci := b.AddOp("cast", "B_fp32", []core.Value{bs})
		bF = b.Out(ci, "B.fp32", []int64{batch, L, N}, units.FP32, "fp32 copy of the B columns")
		uF = b.Cast(u, units.FP32, "fp32 copy of u")
	}
	dB := product(b, "discrete_B", dts, bF, big, units.FP32, "dt x B, fp32 [batch, inner, seq, state]")
	dBu := product(b, "deltaB_u", dB, uF, big, units.FP32, "dt x B x u, fp32 [batch, inner, seq, state]")
	// The loop: state = discrete_A[:, :, i] * state + deltaB_u[:, :, i],
	// then state.to(dtype) @ C[:, i]. Each step's product keeps the
	// previous state (the first, zeros in the activations' dtype, too);
	// each matmul its copy in the activations' dtype (the state itself in
	// fp32); the stacked outputs are [batch, inner, seq].
	li := b.AddOp("selective_scan_loop", "recurrence", []core.Value{dA, dBu, cs})
	y := b.Out(li, "scan_output", core.WithLast(s, I), dt, "the scan's outputs stacked")
	states := L - 1
	var kept []core.Value
	add := func(name string, n int64, dtype units.DType, why string) {
		if n == 0 {
			return
		}
		v := b.Out(li, name, []int64{n, batch, I, N}, dtype, why)
		b.Val(v).Grad = false
		kept = append(kept, v)
	}
	add("ssm_state0", 1, dt, "the zero initial state (saved by the first step)")
	if dt == units.FP32 {
		states = L // the last state is kept by its product with C
	} else {
		add("ssm_state_copies", L, dt, "each step's state in the activations' dtype (saved by its product with C)")
	}
	add("ssm_states", states, units.FP32, "each step's fp32 state (saved by the next step)")
	b.Save(li, kept...)
	b.Save(li, cs) // each step's product with C[:, i], a view of C
	b.Op(li).Flops = 4 * float64(T) * float64(I*N)
	// scan_output + u * D, then times silu(gate) (gate: a view of xz).
	// From transformers 5.15 D is D.float(): a copy the product keeps
	// when the parameters are not fp32, and an fp32 skip, sum and gated
	// product, cast back to the activations' dtype for out_proj
	// (mamba_selective_scan in modeling_mamba.py of the 5.15.0 wheel;
	// slow_forward of 5.14.0 multiplies by self.D).
	skipDT := core.Promote(dt, b.Prec.Params)
	if m.SkipFP32 {
		skipDT = units.FP32
	}
	dF := core.NoValue // D.float(), a copy unless the parameters are fp32
	var di int32
	if m.SkipFP32 && b.Prec.Params != units.FP32 {
		ci := b.AddOp("cast", "D.float", nil, d)
		dF = b.Out(ci, "D.float", []int64{I}, units.FP32, "D.float(), fp32 copy of D (saved by the skip's product)")
		di = b.AddOp("mul", "u_D", []core.Value{u, dF})
	} else {
		di = b.AddOp("mul", "u_D", []core.Value{u}, d)
	}
	ud := b.Out(di, "u_D", b.Shape(u), skipDT, "u x D")
	b.Save(di, dF)
	if b.Trainable(d) {
		b.Save(di, u)
	}
	y1 := b.Add("skip", y, ud)
	gi := b.AddOp("silu", "gate", []core.Value{xz})
	g := b.Out(gi, "silu_gate", core.WithLast(s, I), dt, "silu of the gate z")
	b.Save(gi, xz)
	out := b.Mul("gated", y1, g)
	if m.SkipFP32 {
		out = b.Cast(out, dt, "the gated output cast back (.to(dtype) before out_proj)")
	}
	return b.Linear("out_proj", core.RoleLinear, transposedInput(b, "out_proj_input", out, batch), I, m.Dim, m.Bias)
}

// bcdt is what the slow path reads as dt, B and C: x_proj's output xp
// (each a view of its columns), or with WeightlessNorms each column group
// normed (FalconMambaMixer.forward at transformers 5.25.0: dt_layernorm,
// b_layernorm, c_layernorm). The norms' buffers are registered here.
func (m *Mamba) bcdt(b *core.Builder, xp core.Value) (dt, bs, cs core.Value) {
	if !m.WeightlessNorms {
		return xp, xp, xp
	}
	for _, n := range []struct {
		name string
		dim  int64
	}{{"dt_layernorm", m.Inner}, {"b_layernorm", m.State}, {"c_layernorm", m.State}} {
		done := b.Scope(n.name)
		b.Buffer("weight", []int64{n.dim}, b.Prec.Params, "FalconMambaWeightlessRMSNorm's all-ones weight (non-persistent, never read)")
		done()
	}
	return b.WeightlessRmsNormSlice("dt_layernorm", xp, m.DTRank), b.WeightlessRmsNormSlice("b_layernorm", xp, m.State),
		b.WeightlessRmsNormSlice("c_layernorm", xp, m.State)
}

// lowerFused is MambaMixer.cuda_kernels_forward in training: in_proj,
// then mamba_inner_fn from its output to out_proj's.
func (m *Mamba) lowerFused(b *core.Builder, x core.Value, batch, L int64) core.Value {
	s := b.Shape(x)
	T := core.Rows(s)
	I, N := m.Inner, m.State
	xz := b.Linear("in_proj", core.RoleLinear, x, m.Dim, 2*I, m.Bias)
	dt := b.Dtype(xz)
	// in_proj's output transposed is not contiguous in its last dim:
	// mamba_inner_fn copies it and keeps the copy.
	xzc := b.Ew("copy", "xz", []core.Value{xz}, b.Shape(xz), dt, "xz made contiguous (saved by mamba_inner_fn)")
	a := m.negA(b)
	ps := m.conv(b)
	for _, p := range []struct {
		name  string
		shape []int64
		bias  bool
	}{{"x_proj", []int64{m.xProj(), I}, false}, {"dt_proj", []int64{I, m.DTRank}, true}, {"out_proj", []int64{m.Dim, I}, m.Bias}} {
		done := b.Scope(p.name)
		ps = append(ps, b.Param("weight", p.shape, core.RoleLinear))
		if p.bias {
			ps = append(ps, b.Param("bias", p.shape[:1], core.RoleLinear))
		}
		// LoRA on the module (a name target PEFT takes on Mamba, x_proj or
		// dt_proj; out_proj it refuses): mamba_inner_fn reads the weight
		// itself (self.x_proj.weight, ... in MambaMixer.cuda_kernels_forward,
		// transformers 5.25.0), so the adapter exists and is never called.
		b.IdleAdapter(core.RoleLinear, p.shape[1], p.shape[0])
		done()
	}
	d := b.Param("D", []int64{I}, core.RoleLinear)
	ps = append(ps, d)
	fi := b.AddOp("mamba_inner_fn", "mamba_inner_fn", []core.Value{xzc, a}, ps...)
	y := b.Out(fi, "out", core.WithLast(s, m.Dim), dt, "out_proj's output (inside mamba_inner_fn)")
	saved := []core.Value{xzc, a}
	for _, c := range []struct {
		name  string
		shape []int64
		dt    units.DType
		why   string
	}{
		{"x_dbl", core.WithLast(s, m.xProj()), dt, "x_proj's output x_dbl (saved)"},
		{"B", core.WithLast(s, N), dt, "contiguous copy of B (saved)"},
		{"C", core.WithLast(s, N), dt, "contiguous copy of C (saved)"},
		{"scan_intermediates", []int64{batch, I, (L + mambaScanChunk - 1) / mambaScanChunk, 2 * N}, units.FP32, "the scan's chunk states (saved)"},
		{"scan_out", core.WithLast(s, I), dt, "the scan output before the gate (saved)"},
	} {
		v := b.Out(fi, c.name, c.shape, c.dt, c.why)
		b.Val(v).Grad = false
		saved = append(saved, v)
	}
	if b.Prec.Params != units.FP32 { // D.float() and dt_proj.bias.float() are copies
		for _, n := range []string{"D.float", "delta_bias.float"} {
			v := b.Out(fi, n, []int64{I}, units.FP32, n+"() (saved)")
			b.Val(v).Grad = false
			saved = append(saved, v)
		}
	}
	b.Save(fi, saved...)
	b.Op(fi).Flops = 2*float64(T)*float64(I)*(float64(m.ConvK)+float64(m.xProj())+float64(m.DTRank)+float64(m.Dim)) +
		8*float64(T)*float64(I*N) + 6*float64(T)*float64(I)
	// Backward (MambaInnerFn.backward) recomputes the conv output and
	// delta and holds them with dout_y, out_z and the scan's dconv1d_out
	// and ddelta: six [T, inner] tensors at once.
	b.Op(fi).WorkB = 6 * dt.Bytes(T*I)
	return y
}
