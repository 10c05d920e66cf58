package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// GatedDeltaNet is the Gated DeltaNet linear-attention layer (Yang, Kautz
// and Hatamizadeh 2024, arXiv:2412.06464) as transformers builds it for
// Qwen3-Next (Qwen3NextGatedDeltaNet, the module linear_attn of
// modeling_qwen3_next.py at 5.17.0) and Qwen3.5 (Qwen3_5GatedDeltaNet):
//
//	q, k, v, z, b, a = in_proj_qkvz(x), in_proj_ba(x)   # Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
//	q, k, v = silu(conv1d(cat(q, k, v)))                # depthwise, causal, linear_conv_kernel_dim taps
//	beta, g = sigmoid(b), -exp(A_log) * softplus(a + dt_bias)
//	o = chunk_gated_delta_rule(q, k, v, g, beta)        # q and k l2-normed inside, repeated to the v heads
//	out_proj(norm(o, gate=z))                           # RMSNormGated: rms_norm(o) * silu(z)
//
// The state is heads x key_dim x value_dim a sequence, whatever its
// length: like a Mamba layer it keeps no [seq, seq] term and no kv cache,
// which is why Qwen3-Next's activations (three linear layers to each
// attention layer) grow more slowly with the sequence than a
// transformer's.
//
// Kernel is what runs the delta rule (gated_deltanet_kernels.go):
// GDNFla, flash-linear-attention's chunk_gated_delta_rule with
// causal_conv1d's kernel (what transformers picks when both are
// installed, as Qwen3-Next's model card and training guides install
// them), or GDNTorch, transformers' own torch_chunk_gated_delta_rule and
// F.conv1d, which keep every chunk's state for backward.
type GatedDeltaNet struct {
	Name      string
	Dim       int64 // hidden_size
	KHeads    int64 // linear_num_key_heads
	VHeads    int64 // linear_num_value_heads (a multiple of KHeads)
	KHeadDim  int64 // linear_key_head_dim
	VHeadDim  int64 // linear_value_head_dim
	ConvK     int64 // linear_conv_kernel_dim
	Chunk     int64 // the delta rule's chunk: 64 in fla and in transformers
	SplitProj bool  // Qwen3.5's four input projections instead of Qwen3-Next's two
	// SeparateProj: OLMo Hybrid's OlmoHybridGatedDeltaNet (modeling_olmo_hybrid.py
	// at 5.25.0): q_proj, k_proj, v_proj (concatenated for conv1d), b_proj,
	// a_proj, the gate g_proj (run after the delta rule), o_norm and o_proj.
	SeparateProj bool
	// NegEigval: beta = 2 * sigmoid(b) (linear_allow_neg_eigval), a new
	// tensor the delta rule reads.
	NegEigval bool
	Kernel    string
	// FusedNorm: the gated norm is fla's FusedRMSNormGated (transformers
	// 4.57 builds it when fla is installed); else transformers 5's
	// Qwen3NextRMSNormGated in torch ops.
	FusedNorm bool
	// NormWeightFP32: the torch gated norm multiplies the fp32 normed
	// rows by weight.to(torch.float32) (an fp32 copy in a 16-bit model)
	// before the gate, all in fp32 (GLM-5-Next's RMSNormGated with silu:
	// LaraMiniRMSNormGated, modular_lara_mini.py at transformers 5.25.0),
	// where Qwen3.5's casts the normed rows back first.
	NormWeightFP32 bool
}

// The delta-rule kernels GatedDeltaNet models.
const (
	GDNFla   = "fla"
	GDNTorch = "torch"
)

// GDNKernels lists them, the default first.
func GDNKernels() []string { return []string{GDNFla, GDNTorch} }

func (g *GatedDeltaNet) keyDim() int64   { return g.KHeads * g.KHeadDim }
func (g *GatedDeltaNet) valueDim() int64 { return g.VHeads * g.VHeadDim }
func (g *GatedDeltaNet) convDim() int64  { return 2*g.keyDim() + g.valueDim() }

func (g *GatedDeltaNet) Kind() string           { return "gated_deltanet" }
func (g *GatedDeltaNet) Label() string          { return g.Name }
func (g *GatedDeltaNet) DefaultName() string    { return "linear_attn" }
func (g *GatedDeltaNet) Children() []core.Layer { return nil }
func (g *GatedDeltaNet) InDim() int64           { return g.Dim }
func (g *GatedDeltaNet) OutDim() int64          { return g.Dim }

// Params: the input projections (q, k, v, z, and b, a per value head),
// conv1d (no bias), dt_bias, A_log, the norm (value_head_dim) and out_proj.
func (g *GatedDeltaNet) Params() int64 {
	return g.Dim*(g.convDim()+g.valueDim()+2*g.VHeads) + g.convDim()*g.ConvK + 2*g.VHeads + g.VHeadDim + g.valueDim()*g.Dim
}

func (g *GatedDeltaNet) kernel() string {
	if g.Kernel == "" {
		return GDNFla
	}
	return g.Kernel
}

func (g *GatedDeltaNet) Summary() string {
	return fmt.Sprintf("dim %d, %d key heads of %d, %d value heads of %d, conv %d, %s", g.Dim, g.KHeads, g.KHeadDim, g.VHeads, g.VHeadDim, g.ConvK, g.kernel())
}

func (g *GatedDeltaNet) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, g.Dim}, sized{FieldKeyHeads, g.KHeads}, sized{FieldValueHeads, g.VHeads},
		sized{FieldKeyHeadDim, g.KHeadDim}, sized{FieldValueHeadDim, g.VHeadDim}, sized{FieldConvKernel, g.ConvK}, sized{FieldChunk, g.Chunk}); err != nil {
		return err
	}
	if g.VHeads%g.KHeads != 0 {
		return fieldErr(path, FieldKeyHeads, fmt.Sprintf(" (%d) must divide ", g.KHeads), FieldValueHeads, fmt.Sprintf(" (%d)", g.VHeads)).
			withHint("q and k are repeated to the value heads (Qwen3-Next: 16 key heads, 32 value heads)")
	}
	switch g.kernel() {
	case GDNFla, GDNTorch:
	default:
		return fieldErr(path, fmt.Sprintf("unknown gated delta rule kernel %q", g.Kernel)).
			withHint(FieldKernel, ` is "fla" (flash-linear-attention with causal-conv1d) or "torch" (transformers' fallback)`)
	}
	return nil
}

// CheckLayout: tensor and context parallelism of the linear-attention
// layers are not modelled (transformers' tp_plan gathers their outputs;
// fla's context parallelism passes states between ranks).
func (g *GatedDeltaNet) CheckLayout(path string, par core.Parallelism) error {
	return recurrentLayout(path, par, "Gated DeltaNet", "the recurrent state would have to pass between ranks")
}

func (g *GatedDeltaNet) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != g.Dim {
		panic(core.ShapeMismatch(b, "gated_deltanet", g.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(g))()
	s := b.Shape(x)
	kd, vd, hv := g.keyDim(), g.valueDim(), g.VHeads
	var mixed, zSrc, bSrc, aSrc core.Value
	var locals []core.Value // the forward's locals, alive until it returns
	switch {
	case g.SeparateProj:
		var qkv []core.Value
		for _, p := range []struct {
			name string
			n    int64
		}{{"q_proj", kd}, {"k_proj", kd}, {"v_proj", vd}} {
			qkv = append(qkv, b.Linear(p.name, core.RoleLinear, x, g.Dim, p.n, false))
		}
		mixed = b.Ew("cat", "mixed_qkv", qkv, core.WithLast(s, g.convDim()), b.Dtype(qkv[0]), "torch.cat of q_proj, k_proj and v_proj: conv1d's input")
	case g.SplitProj:
		mixed = b.Linear("in_proj_qkv", core.RoleLinear, x, g.Dim, g.convDim(), false)
		zSrc = b.Linear("in_proj_z", core.RoleLinear, x, g.Dim, vd, false)
		bSrc = b.Linear("in_proj_b", core.RoleLinear, x, g.Dim, hv, false)
		aSrc = b.Linear("in_proj_a", core.RoleLinear, x, g.Dim, hv, false)
		locals = append(locals, zSrc, bSrc, aSrc)
	default:
		qkvz := b.Linear("in_proj_qkvz", core.RoleLinear, x, g.Dim, 2*kd+2*vd, false)
		ba := b.Linear("in_proj_ba", core.RoleLinear, x, g.Dim, 2*hv, false)
		dt := b.Dtype(qkvz)
		// fix_query_key_value_ordering splits per key head; reshaping q,
		// k and v to [b, s, -1] merges strided dims: three copies, then
		// torch.cat.
		var parts []core.Value
		for _, p := range []struct {
			name string
			n    int64
		}{{"query", kd}, {"key", kd}, {"value", vd}} {
			parts = append(parts, b.Ew("copy", p.name, []core.Value{qkvz}, core.WithLast(s, p.n), dt, p.name+" reshaped to [batch, seq, heads x dim] (a copy of a strided view)"))
		}
		mixed = b.Ew("cat", "mixed_qkv", parts, core.WithLast(s, g.convDim()), dt, "torch.cat of query, key and value: conv1d's input")
		zSrc, bSrc, aSrc = qkvz, ba, ba
		locals = append(locals, qkvz, ba) // projected_states_qkvz and _ba
	}
	conv := g.conv(b, mixed, s)
	if g.SeparateProj {
		bSrc = b.Linear("b_proj", core.RoleLinear, x, g.Dim, hv, false)
		aSrc = b.Linear("a_proj", core.RoleLinear, x, g.Dim, hv, false)
	}
	beta, gate := g.gates(b, bSrc, aSrc, s)
	if g.NegEigval {
		beta = b.Ew("mul", "beta_x2", []core.Value{beta}, b.Shape(beta), b.Dtype(beta), "beta * 2.0 (linear_allow_neg_eigval), the delta rule's beta")
	}
	// q and k repeated to the value heads (repeat_interleave: copies,
	// held by the locals query and key).
	q, k := conv, conv
	if hv != g.KHeads {
		q = b.Ew("repeat_interleave", "query_heads", []core.Value{conv}, core.WithLast(s, hv*g.KHeadDim), b.Dtype(conv), "q repeated to the value heads")
		k = b.Ew("repeat_interleave", "key_heads", []core.Value{conv}, core.WithLast(s, hv*g.KHeadDim), b.Dtype(conv), "k repeated to the value heads")
	}
	var o core.Value
	if g.kernel() == GDNTorch {
		o = g.torchChunk(b, q, k, conv, beta, gate, s)
	} else {
		o = g.flaChunk(b, q, k, conv, beta, gate, s)
	}
	z := zSrc
	switch {
	case g.SeparateProj: // gate = g_proj(hidden_states), after the delta rule
		z = b.Linear("g_proj", core.RoleLinear, x, g.Dim, vd, false)
		locals = append(locals, z) // the local gate, alive until the forward returns
	case !g.SplitProj: // z.reshape(-1, head_v_dim) of a strided view: a copy
		z = b.Ew("copy", "z", []core.Value{zSrc}, core.WithLast(s, vd), b.Dtype(zSrc), "the norm's gate z, reshape's copy of in_proj_qkvz's z part")
	}
	y := g.norm(b, o, z, s)
	outName := "out_proj"
	if g.SeparateProj {
		outName = "o_proj"
	}
	out := b.Linear(outName, core.RoleLinear, y, vd, g.Dim, false)
	locals = append(locals, conv, q, k, gate)
	b.KeepAlive("forward_locals", locals...)
	return out
}

// conv lowers causal_conv1d_fn with silu over q, k and v (shortConvSiLU).
func (g *GatedDeltaNet) conv(b *core.Builder, mixed core.Value, s []int64) core.Value {
	return shortConvSiLU(b, mixed, s, g.convDim(), g.ConvK, g.kernel() == GDNTorch, false)
}

// shortConvSiLU lowers the depthwise causal conv1d (no bias, convK taps
// over width channels) with silu that the linear-attention layers run on
// q, k and v: causal_conv1d's kernel saves its input
// (CausalConv1dFn.forward: save_for_backward(x, weight, ...)); with
// torchPath, transformers' fallback runs F.conv1d with padding convK - 1,
// so silu saves the padded output besides, seq + convK - 1 positions a
// sequence. With fp32Weight the weight stays fp32 in a bf16 or fp16 model
// (Ling 3's conv1d), and causal_conv1d_fn's hidden_states.to(weight.dtype)
// makes the fp32 copy conv1d saves; the padded output is fp32 and silu's
// output is cast back.
func shortConvSiLU(b *core.Builder, mixed core.Value, s []int64, width, convK int64, torchPath, fp32Weight bool) core.Value {
	w := b.Param("conv1d.weight", []int64{width, 1, convK}, core.RoleLinear)
	dt := b.Dtype(mixed)
	in, convDT := mixed, dt
	if fp32Weight {
		keepParamFP32(b, "conv1d.weight")
		convDT = b.P.Params[w].Stored(b.Prec)
		in = b.Cast(mixed, convDT, "hidden_states.to(weight.dtype): conv1d's input in its fp32 weight's dtype")
	}
	i := b.AddOp("conv1d", "causal_conv1d", []core.Value{in}, w)
	y := b.Out(i, "mixed_qkv_conv", core.WithLast(s, width), dt, "q, k, v after the causal conv1d and silu")
	b.Save(i, in)
	if torchPath {
		seq := s[len(s)-2]
		batch := core.Rows(s) / max(seq, 1)
		p := b.Out(i, "conv_padded", []int64{batch, width, seq + convK - 1}, convDT, "F.conv1d's padded output, silu's input (saved)")
		b.Val(p).Grad = false
		b.Save(i, p)
		if convDT != dt {
			b.Op(i).WorkF = convDT.Bytes(core.Rows(s) * width) // silu's output before .to(hidden_states.dtype)
		}
	}
	b.Op(i).Flops = 2 * float64(core.Rows(s)) * float64(width*convK)
	b.Op(i).Bytes += float64(b.Val(in).Bytes)
	return y
}

// gates lowers beta = b.sigmoid() (sigmoid saves its output) and
// g = -A_log.float().exp() * F.softplus(a.float() + dt_bias): softplus
// saves its fp32 input, the product its fp32 output and -exp(A_log), and
// exp its output (two [value heads] fp32 tensors).
func (g *GatedDeltaNet) gates(b *core.Builder, bSrc, aSrc core.Value, s []int64) (beta, gate core.Value) {
	ps := []int32{b.Param("dt_bias", []int64{g.VHeads}, core.RoleLinear), b.Param("A_log", []int64{g.VHeads}, core.RoleLinear)}
	i := b.AddOp("gdn_gates", "beta_g", []core.Value{bSrc, aSrc}, ps...)
	per := core.WithLast(s, g.VHeads)
	beta = b.Out(i, "beta", per, b.Dtype(bSrc), "beta = sigmoid(b), saved")
	gate = b.Out(i, "g", per, units.FP32, "the log decay g (fp32)")
	saved := []core.Value{beta}
	for _, v := range []struct{ name, why string }{
		{"softplus_in", "a.float() + dt_bias, saved by softplus"},
		{"softplus_out", "softplus(a + dt_bias), saved by the product"},
	} {
		saved = append(saved, b.Out(i, v.name, per, units.FP32, v.why))
	}
	saved = append(saved, b.Out(i, "exp_A", []int64{g.VHeads}, units.FP32, "exp(A_log), saved by exp"),
		b.Out(i, "neg_exp_A", []int64{g.VHeads}, units.FP32, "-exp(A_log), saved by the product"))
	for _, v := range saved[1:] {
		b.Val(v).Grad = false
	}
	b.Save(i, saved...)
	b.Op(i).Flops = 10 * float64(core.Numel(per))
	return beta, gate
}

// norm lowers the gated RMS norm over each value head, weight
// [value_head_dim]: fla's FusedRMSNormGated saves its input, the gate and
// the fp32 rstd (LayerNormFn: save_for_backward(residual_out, g, weight,
// bias, mean, rstd)); Qwen3NextRMSNormGated in torch ops saves the fp32
// input (pow, and its product with rsqrt), the rsqrt, the normed value
// cast back (for the weight), the fp32 gate (silu's input), the weighted
// value and silu's fp32 output (the final product promotes to fp32).
func (g *GatedDeltaNet) norm(b *core.Builder, o, z core.Value, s []int64) core.Value {
	name := "norm"
	if g.SeparateProj {
		name = "o_norm"
	}
	defer b.Scope(name)()
	w := b.Param("weight", []int64{g.VHeadDim}, core.RoleNorm)
	i := b.AddOp("rms_norm_gated", "norm", []core.Value{o, z}, w)
	vd := g.valueDim()
	dt := b.Dtype(o)
	y := b.Out(i, "out", core.WithLast(s, vd), dt, "rms_norm(o) * silu(z), out_proj's input")
	rows := core.Rows(s) * g.VHeads
	rstd := b.Out(i, "rstd", []int64{rows, 1}, units.FP32, "the norm's rsqrt per token and value head (saved)")
	saved := []core.Value{rstd}
	normDT := dt
	if g.NormWeightFP32 && !g.FusedNorm {
		normDT = units.FP32 // weight.to(float32) * the fp32 normed rows
		if b.P.Params[w].Stored(b.Prec) != units.FP32 {
			saved = append(saved, b.Out(i, "weight_fp32", []int64{g.VHeadDim}, units.FP32, "weight.to(torch.float32), saved by its product"))
		}
	}
	if g.FusedNorm {
		b.Save(i, o, z)
	} else {
		for _, v := range []struct {
			name string
			dt   units.DType
			why  string
		}{
			{"x_fp32", units.FP32, "o.to(float32), saved by pow and by its product with rsqrt"},
			{"normed", normDT, "the normed value cast back, saved by the weight's product"},
			{"z_fp32", units.FP32, "gate.to(float32), silu's input (saved)"},
			{"weighted", normDT, "weight * normed, saved by the gate's product"},
			{"silu_z", units.FP32, "silu of the gate (fp32), saved by the product"},
		} {
			saved = append(saved, b.Out(i, v.name, core.WithLast(s, vd), v.dt, v.why))
		}
		// The fp32 normed value and the fp32 product before .to() live
		// beside them in the forward.
		b.Op(i).WorkF = 2 * units.FP32.Bytes(core.Rows(s)*vd)
	}
	for _, v := range saved {
		b.Val(v).Grad = false
	}
	b.Save(i, saved...)
	b.Op(i).Flops = 8 * float64(core.Rows(s)*vd)
	b.Op(i).Bytes += float64(b.Val(o).Bytes + b.Val(z).Bytes)
	return y
}
