package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// KimiDeltaAttention is Kimi Delta Attention (KDA; Kimi Linear, Moonshot
// AI 2025, arXiv:2510.26692), the linear-attention layer of Kimi Linear
// as transformers builds it (KimiLinearDeltaAttention, the module
// self_attn of its linear_attention layers; modeling_kimi_linear.py at
// 5.25.0):
//
//	q, k, v = silu(conv1d(cat(q_proj(x), k_proj(x), v_proj(x))))  # depthwise, causal
//	g = -exp(A_log) * softplus(f_b_proj(f_a_proj(x)) + dt_bias)    # forget_gate: a decay per channel
//	beta = sigmoid(b_proj(x))                                      # per head
//	o = chunk_kimi_delta_attention(q, k, v, g, beta)               # q, k l2-normed inside
//	o_proj(o_norm(o, gate=g_b_proj(g_a_proj(x))))                  # rms_norm(o) * sigmoid(gate), fp32
//
// It is the gated delta rule of GatedDeltaNet with the decay per channel
// (heads x head_dim) instead of per head: the forget gate and the output
// gate are low rank (head_dim wide), q, k and v have as many heads of one
// width, and the state is heads x head_dim x head_dim a sequence.
//
// The kernel is transformers' own chunk_kimi_delta_attention
// (kimi_delta_kernel.go), what it runs without flash-linear-attention:
// its per-channel decay makes [chunk, chunk, head_dim] tensors a chunk
// and head, which it keeps for backward. With fla installed transformers
// runs fla.ops.kda's chunk_kda instead, which memsh does not model.
type KimiDeltaAttention struct {
	Name    string
	Dim     int64 // hidden_size
	Heads   int64 // linear_attn_config.num_heads
	HeadDim int64 // linear_attn_config.head_dim: q, k and v alike
	ConvK   int64 // linear_attn_config.short_conv_kernel_size
	Chunk   int64 // the delta rule's chunk: 64
	// DTBiasFP32: the forget gate's dt_bias stays fp32 in a bf16 or fp16
	// model (KimiLinearPreTrainedModel's _keep_in_fp32_modules_strict
	// lists "dt_bias" from transformers 5.24).
	DTBiasFP32 bool
	// FullRankGates is Ling 3's layer (BailingHybridDeltaAttention,
	// modeling_bailing_hybrid.py at 5.25.0; kimi_delta_ling.go): the
	// forget gate's f_proj and the output gate's g_proj map the hidden
	// state to heads x head_dim in one projection each, A_log is
	// [heads], and conv1d, dt_bias and A_log stay fp32 in a bf16 or fp16
	// model (BailingHybridPreTrainedModel's _keep_in_fp32_modules_strict);
	// SafeGate picks its forget gate.
	FullRankGates bool
	// SafeGate: Ling 3's bounded forget gate (kda_safe_gate, its default),
	// lower_bound * sigmoid(exp(A_log) * (f + dt_bias)); else
	// -exp(A_log) * softplus(f + dt_bias). FullRankGates only.
	SafeGate bool
}

func (a *KimiDeltaAttention) width() int64 { return a.Heads * a.HeadDim }

func (a *KimiDeltaAttention) Kind() string           { return "kimi_delta_attention" }
func (a *KimiDeltaAttention) Label() string          { return a.Name }
func (a *KimiDeltaAttention) DefaultName() string    { return "self_attn" }
func (a *KimiDeltaAttention) Children() []core.Layer { return nil }
func (a *KimiDeltaAttention) InDim() int64           { return a.Dim }
func (a *KimiDeltaAttention) OutDim() int64          { return a.Dim }

// Params: q_proj, k_proj, v_proj, conv1d (no bias), the forget gate's
// f_a_proj, f_b_proj, dt_bias and A_log, b_proj, the output gate's
// g_a_proj and g_b_proj, o_norm (head_dim) and o_proj.
// With FullRankGates, f_proj and g_proj instead of the low-rank pairs.
func (a *KimiDeltaAttention) Params() int64 {
	w, d := a.width(), a.HeadDim
	gates := 2 * (a.Dim*d + d*w)
	if a.FullRankGates {
		gates = 2 * a.Dim * w
	}
	return 3*a.Dim*w + 3*w*a.ConvK + gates + w + a.Heads + a.Dim*a.Heads + d + w*a.Dim
}

func (a *KimiDeltaAttention) Summary() string {
	return fmt.Sprintf("dim %d, %d heads of %d, conv %d, transformers' torch chunk kernel", a.Dim, a.Heads, a.HeadDim, a.ConvK)
}

func (a *KimiDeltaAttention) Validate(path string) error {
	return checkPositive(path, sized{FieldDim, a.Dim}, sized{FieldHeads, a.Heads}, sized{FieldHeadDim, a.HeadDim},
		sized{FieldConvKernel, a.ConvK}, sized{FieldChunk, a.Chunk})
}

// CheckLayout: tensor and context parallelism are not modelled
// (KimiLinearConfig's tp_plan leaves self_attn replicated).
func (a *KimiDeltaAttention) CheckLayout(path string, par core.Parallelism) error {
	return recurrentLayout(path, par, "Kimi Delta Attention", "the recurrent state would have to pass between ranks")
}

func (a *KimiDeltaAttention) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.Dim {
		panic(core.ShapeMismatch(b, "kimi_delta_attention", a.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(a))()
	s := b.Shape(x)
	w, d := a.width(), a.HeadDim
	var qkv []core.Value
	for _, name := range []string{"q_proj", "k_proj", "v_proj"} {
		qkv = append(qkv, b.Linear(name, core.RoleLinear, x, a.Dim, w, false))
	}
	mixed := b.Ew("cat", "mixed_qkv", qkv, core.WithLast(s, 3*w), b.Dtype(qkv[0]), "torch.cat of q_proj, k_proj and v_proj: conv1d's input")
	conv := shortConvSiLU(b, mixed, s, 3*w, a.ConvK, true, a.FullRankGates)
	var g, gate core.Value
	if a.FullRankGates {
		g = a.lingForgetGate(b, x, s)
	} else {
		g = a.forgetGate(b, x, s)
	}
	beta := a.beta(b, x, s)
	o := a.torchChunk(b, conv, g, beta, s)
	if a.FullRankGates {
		gate = b.Linear("g_proj", core.RoleLinear, x, a.Dim, w, false)
	} else {
		ga := b.Linear("g_a_proj", core.RoleLinear, x, a.Dim, d, false)
		gate = b.Linear("g_b_proj", core.RoleLinear, ga, d, w, false)
	}
	y := a.norm(b, o, gate, s)
	out := b.Linear("o_proj", core.RoleLinear, y, w, a.Dim, false)
	b.KeepAlive("forward_locals", conv, g, beta, gate)
	return out
}

// forgetGate lowers KimiLinearForgetGate: g = f_b_proj(f_a_proj(x)).float()
// + dt_bias, then -exp(A_log) * where(g > 20, g, log(1 + exp(g))). exp
// saves its output, log its input 1 + exp(g), where its condition, the
// product both factors: exp(A_log) and its negation ([heads] fp32), and
// exp(g), 1 + exp(g), the softplus and the mask per channel (fp32, bool).
func (a *KimiDeltaAttention) forgetGate(b *core.Builder, x core.Value, s []int64) core.Value {
	defer b.Scope("forget_gate")()
	w, d := a.width(), a.HeadDim
	fa := b.Linear("f_a_proj", core.RoleLinear, x, a.Dim, d, false)
	fb := b.Linear("f_b_proj", core.RoleLinear, fa, d, w, false)
	bias := b.Param("dt_bias", []int64{w}, core.RoleLinear)
	if a.DTBiasFP32 {
		keepParamFP32(b, "dt_bias")
	}
	i := b.AddOp("kda_forget_gate", "g", []core.Value{fb}, bias, b.Param("A_log", []int64{1, 1, a.Heads, 1}, core.RoleLinear))
	per := core.WithLast(s, w)
	g := b.Out(i, "g", per, units.FP32, "the log decay per channel (fp32), the delta rule's g")
	saved := savedOuts(b, i, []savedSpec{
		{"exp_A", []int64{a.Heads}, units.FP32, "exp(A_log), saved by exp"},
		{"neg_exp_A", []int64{a.Heads}, units.FP32, "-exp(A_log), saved by the product"},
		{"exp_g", per, units.FP32, "exp(g), saved by exp"},
		{"one_plus_exp_g", per, units.FP32, "1 + exp(g), saved by log"},
		{"g_over_20", per, units.BOOL, "the mask g > 20, saved by where"},
		{"softplus", per, units.FP32, "where(g > 20, g, log(1 + exp(g))), saved by the product"},
	})
	b.Save(i, saved...)
	b.Op(i).Flops = 6 * float64(core.Numel(per))
	return g
}

// beta lowers sigmoid(b_proj(x)), one per token and head, which sigmoid
// saves.
func (a *KimiDeltaAttention) beta(b *core.Builder, x core.Value, s []int64) core.Value {
	bp := b.Linear("b_proj", core.RoleLinear, x, a.Dim, a.Heads, false)
	i := b.AddOp("sigmoid", "beta", []core.Value{bp})
	beta := b.Out(i, "beta", core.WithLast(s, a.Heads), b.Dtype(bp), "beta = sigmoid(b_proj(x)), saved")
	b.Save(i, beta)
	b.Op(i).Flops = 4 * float64(core.Numel(b.Shape(beta)))
	return beta
}

// norm lowers KimiLinearRMSNormGated over each head, strictly fp32:
// x = o.float(); x * rsqrt(mean(x^2) + eps) (pow saves x, the product x
// and the rsqrt); weight.float() times it (the product saves the normed
// x and, where the parameters are not fp32, the weight's fp32 copy);
// times sigmoid(gate.float()) (sigmoid saves its fp32 output, the product
// both factors); cast back to o's dtype for o_proj. In fp32, x is the
// kernel's output itself.
func (a *KimiDeltaAttention) norm(b *core.Builder, o, gate core.Value, s []int64) core.Value {
	defer b.Scope("o_norm")()
	wt := b.Param("weight", []int64{a.HeadDim}, core.RoleNorm)
	i := b.AddOp("rms_norm_gated", "norm", []core.Value{o, gate}, wt)
	w := a.width()
	dt := b.Dtype(o)
	y := b.Out(i, "out", core.WithLast(s, w), dt, "rms_norm(o) * sigmoid(gate), o_proj's input")
	saved := []core.Value{o}
	if dt != units.FP32 {
		saved[0] = b.Out(i, "x_fp32", core.WithLast(s, w), units.FP32, "o.to(float32), saved by pow and by its product with rsqrt")
	}
	saved = append(saved, b.Out(i, "rstd", []int64{core.Rows(s) * a.Heads, 1}, units.FP32, "the norm's rsqrt per token and head (saved)"))
	if b.P.Params[wt].Stored(b.Prec) != units.FP32 {
		wc := b.Out(i, "weight_fp32", []int64{a.HeadDim}, units.FP32, "weight.to(float32), saved by its product")
		b.Val(wc).Cat = core.CatParams // a saved weight copy, as the routers' fp32 casts
		saved = append(saved, wc)
	}
	for _, v := range []struct{ name, why string }{
		{"normed", "x * rsqrt, saved by the weight's product"},
		{"sigmoid_gate", "sigmoid(gate.float()), saved by sigmoid and the gate's product"},
		{"weighted", "weight * normed, saved by the gate's product"},
	} {
		saved = append(saved, b.Out(i, v.name, core.WithLast(s, w), units.FP32, v.why))
	}
	for _, v := range saved {
		if v != o {
			b.Val(v).Grad = false
		}
	}
	b.Save(i, saved...)
	b.Op(i).Flops = 8 * float64(core.Rows(s)*w)
	b.Op(i).Bytes += float64(b.Val(o).Bytes + b.Val(gate).Bytes)
	return y
}
