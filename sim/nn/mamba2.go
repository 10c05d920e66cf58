package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Mamba2 is the Mamba-2 mixer (Dao and Gu 2024, arXiv:2405.21060; the
// state-space duality), as transformers' Mamba2Mixer trains it with the
// mamba_ssm kernels (cuda_kernels_forward: in_proj, then
// mamba_split_conv1d_scan_combined, which runs the depthwise causal
// conv1d, the chunked selective scan, the gated RMS norm and out_proj in
// one autograd function):
//
//	zxbcdt = in_proj(x)                     # [T, 2*inner + 2*groups*state + heads]
//	y = out_proj(norm(ssd(conv1d(xBC), dt, A, B, C, D), gate=z))
//
// The chunked scan (chunk_size tokens a chunk) keeps nothing per chunk
// for backward: MambaSplitConv1dScanCombinedFn saves zxbcdt, the scan
// output before the gated norm (out_x, [T, inner]) and the norm's rstd
// (fp32, one per token and group), and its backward recomputes the
// convolution, dt, the chunk states and C·B. What a Mamba-2 layer keeps
// per token is therefore fixed: no [seq, seq] term and no kv heads, which
// is why a hybrid's activations grow more slowly with the sequence than a
// transformer's of the same width.
type Mamba2 struct {
	Name      string
	Dim       int64 // hidden_size
	Inner     int64 // intermediate size: heads * head_dim (expand * hidden)
	Heads     int64
	HeadDim   int64
	Groups    int64 // n_groups
	State     int64 // state_size
	ConvK     int64 // conv_kernel
	Chunk     int64 // chunk_size
	Bias      bool  // use_bias: in_proj and out_proj
	ConvBias  bool  // use_conv_bias
	GatedNorm bool  // the gated RMSNorm before out_proj (rms_norm)
	// MupVector: in_proj's output is multiplied by a per-channel buffer
	// before the kernel (Falcon-H1's projected_states * mup_vector,
	// FalconH1Mixer.forward at 5.25.0): a new tensor of its size, which
	// the kernel keeps in place of in_proj's output; the product by a
	// buffer keeps only the buffer.
	MupVector bool
}

func (m *Mamba2) inProj() int64  { return 2*m.Inner + 2*m.Groups*m.State + m.Heads }
func (m *Mamba2) convDim() int64 { return m.Inner + 2*m.Groups*m.State }

func (m *Mamba2) Kind() string           { return "mamba2" }
func (m *Mamba2) Label() string          { return m.Name }
func (m *Mamba2) DefaultName() string    { return "mixer" }
func (m *Mamba2) Children() []core.Layer { return nil }
func (m *Mamba2) InDim() int64           { return m.Dim }
func (m *Mamba2) OutDim() int64          { return m.Dim }

// Params: in_proj, conv1d, dt_bias, A_log, D, the norm, out_proj.
func (m *Mamba2) Params() int64 {
	n := m.Dim*m.inProj() + m.convDim()*m.ConvK + 3*m.Heads + m.Inner*m.Dim
	if m.Bias {
		n += m.inProj() + m.Dim
	}
	if m.ConvBias {
		n += m.convDim()
	}
	if m.GatedNorm {
		n += m.Inner
	}
	return n
}

func (m *Mamba2) Summary() string {
	return fmt.Sprintf("dim %d, %d heads of %d, %d groups, state %d, chunk %d", m.Dim, m.Heads, m.HeadDim, m.Groups, m.State, m.Chunk)
}

func (m *Mamba2) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, m.Dim}, sized{FieldHeads, m.Heads}, sized{FieldHeadDim, m.HeadDim},
		sized{FieldGroups, m.Groups}, sized{FieldState, m.State}, sized{FieldConvKernel, m.ConvK}, sized{FieldChunk, m.Chunk}); err != nil {
		return err
	}
	if m.Inner != m.Heads*m.HeadDim {
		return fieldErr(path, FieldInner, fmt.Sprintf(" %d must be ", m.Inner), FieldHeads, " x ", FieldHeadDim, fmt.Sprintf(" (%d x %d)", m.Heads, m.HeadDim))
	}
	if m.Heads%m.Groups != 0 {
		return fieldErr(path, FieldGroups, fmt.Sprintf(" (%d) must divide ", m.Groups), FieldHeads, fmt.Sprintf(" (%d)", m.Heads))
	}
	return nil
}

// CheckLayout: tensor parallelism of Mamba layers is not modelled.
func (m *Mamba2) CheckLayout(path string, par core.Parallelism) error {
	return recurrentLayout(path, par, "Mamba-2", "the scan would run on each rank's tokens alone, with no exchange")
}

// recurrentLayout refuses tensor and context parallelism for a recurrent
// layer kind (Mamba, Mamba-2, Gated DeltaNet), cpWhy saying what context
// parallelism would need.
func recurrentLayout(path string, par core.Parallelism, kind, cpWhy string) error {
	const hint = "use data parallelism (with FSDP or ZeRO) or pipeline parallelism for hybrid models"
	if par.TP > 1 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d: tensor parallelism of %s layers is not modelled", par.TP, kind), Hint: hint}
	}
	if par.CP > 1 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("cp=%d: context parallelism of %s layers is not modelled (%s)", par.CP, kind, cpWhy), Hint: hint}
	}
	return nil
}

func (m *Mamba2) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "mamba2", m.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(m))()
	s := b.Shape(x)
	T := core.Rows(s)
	zxbcdt := b.Linear("in_proj", core.RoleLinear, x, m.Dim, m.inProj(), m.Bias)
	dt := b.Dtype(zxbcdt)
	if m.MupVector {
		zxbcdt = b.Ew("mul", "mup_vector", []core.Value{zxbcdt}, b.Shape(zxbcdt), dt, "in_proj's output times mup_vector")
	}
	// The parameters the combined kernel reads.
	conv := b.Param("conv1d.weight", []int64{m.convDim(), 1, m.ConvK}, core.RoleLinear)
	ps := []int32{conv}
	if m.ConvBias {
		ps = append(ps, b.Param("conv1d.bias", []int64{m.convDim()}, core.RoleLinear))
	}
	ps = append(ps, b.Param("dt_bias", []int64{m.Heads}, core.RoleLinear))
	a := m.decay(b, b.Param("A_log", []int64{m.Heads}, core.RoleLinear))
	ps = append(ps, b.Param("D", []int64{m.Heads}, core.RoleLinear))
	if m.MupVector {
		b.Buffer("mup_vector", []int64{1, 1, m.inProj()}, b.Prec.Params, "the mixer's per-channel muP multipliers (register_buffer, cast with the model)")
	}
	if m.GatedNorm {
		ps = append(ps, b.Param("norm.weight", []int64{m.Inner}, core.RoleNorm))
	}
	done := b.Scope("out_proj")
	out := b.Param("weight", []int64{m.Dim, m.Inner}, core.RoleLinear)
	ps = append(ps, out)
	if m.Bias {
		ps = append(ps, b.Param("bias", []int64{m.Dim}, core.RoleLinear))
	}
	// LoRA on out_proj (PEFT's all-linear on Bamba and Zamba2, whose
	// model types PEFT does not refuse as Mamba models): the kernel reads
	// self.out_proj.weight, the base layer's, so the adapter exists and
	// is never called (BambaMixer.cuda_kernels_forward, Zamba2MambaMixer's
	// at transformers 5.25.0).
	b.IdleAdapter(core.RoleLinear, m.Inner, m.Dim)
	done()
	i := b.AddOp("ssd_scan", "mamba_split_conv1d_scan_combined", []core.Value{zxbcdt, a}, ps...)
	y := b.Out(i, "out", core.WithLast(s, m.Dim), dt, "the mixer's output (out_proj inside the combined kernel)")
	outX := b.Out(i, "out_x", core.WithLast(s, m.Inner), dt, "the scan output before the gated norm (saved)")
	b.Val(outX).Grad = false
	b.Save(i, zxbcdt, outX, a)
	if m.GatedNorm { // without the norm the kernel's rstd is None (MambaSplitConv1dScanCombinedFn.forward)
		rstd := b.Out(i, "rstd", []int64{T, m.Groups}, units.FP32, "the gated norm's rstd per token and group (saved)")
		b.Val(rstd).Grad = false
		b.Save(i, rstd)
	}
	chunks := (T + m.Chunk - 1) / m.Chunk
	// Forward transients (mamba_ssm ssd_combined.py): the convolved xBC,
	// dt after softplus and its chunked cumsum (fp32), the chunk states
	// (fp32, heads x head_dim x state each), C·B per chunk (fp32), and the
	// normed, gated y that feeds out_proj.
	states := units.FP32.Bytes(chunks * m.Heads * m.HeadDim * m.State)
	cb := units.FP32.Bytes(chunks * m.Groups * m.Chunk * m.Chunk)
	work := dt.Bytes(T*m.convDim()) + 2*units.FP32.Bytes(T*m.Heads) + states + cb + dt.Bytes(T*m.Inner)
	b.Op(i).WorkF = work
	// Backward recomputes the same and holds their gradients beside them.
	b.Op(i).WorkB = 2 * work
	f := 2 * float64(T) * (float64(m.Chunk)*float64(m.Groups*m.State+m.Heads*m.HeadDim) + 2*float64(m.Heads*m.HeadDim*m.State))
	f += 2 * float64(T) * float64(m.convDim()*m.ConvK)
	f += 2 * float64(T) * float64(m.Inner*m.Dim) // out_proj
	b.Op(i).Flops = f
	b.Op(i).Bytes += float64(b.Val(zxbcdt).Bytes) + float64(b.Val(outX).Bytes) + float64(dt.Bytes(m.Inner*m.Dim))
	return y
}

// decay is A = -torch.exp(self.A_log.float()), which the kernel takes
// (Mamba2Mixer.cuda_kernels_forward; GraniteMoeHybridMambaLayer and
// FalconH1Mixer at 5.25.0): exp keeps its fp32 result, the kernel keeps
// A, one fp32 value a head each.
func (m *Mamba2) decay(b *core.Builder, aLog int32) core.Value {
	e := b.AddOp("exp", "A_log_exp", nil, aLog)
	ex := b.Out(e, "exp_A_log", []int64{m.Heads}, units.FP32, "exp(A_log.float()), kept by its backward")
	b.Save(e, ex)
	n := b.AddOp("neg", "A", []core.Value{ex})
	return b.Out(n, "A", []int64{m.Heads}, units.FP32, "A = -exp(A_log), kept by the kernel")
}
