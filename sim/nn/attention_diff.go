package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention.Differential is DiffLlama's differential attention
// (DiffLlamaAttention.forward, modular_diffllama.py at transformers
// 5.13 to 5.25.0; the Differential Transformer, arXiv 2410.05258): two
// attention calls that share q and k, over the two halves of v's heads,
//
//	v1, v2 = (v.repeat(1, 2, 1, 1) for v in chunk(v, 2, dim=1))  # each [b, kv, s, d], a copy
//	o = cat([attn(q, k, v1), attn(q, k, v2)], -1)                 # [b, s, heads, 2d]
//	o1, o2 = chunk(o, 2, dim=2)                                   # views, heads / 2 each
//	λ = exp(sum(λq1 * λk1, fp32)) - exp(sum(λq2 * λk2, fp32)) + λinit   # 0-dim, in q's dtype
//	o = (1 - λinit) * groupnorm(o1 - λ * o2)                      # nn.RMSNorm(2d), no weight
//	o_proj(o.reshape(b, s, heads * d))
//
// Each call runs the kernel as the attention would (eager's repeat_kv
// copies of k and its v half, SDPA's grouped heads); each saves what it
// saves, q and k once between them. The product saves λ and the cat's
// output (o2 is a view of it); exp saves its 0-dim fp32 outputs; the
// group norm (torch's composite rms_norm) keeps its input's fp32 copy
// (the input itself in fp32) and the fp32 rsqrt of each head pair, and
// casts back; the scalar product that follows saves nothing, and o_proj
// saves it. lambda_q1, lambda_k1, lambda_q2 and lambda_k2 are parameters
// of head_dim each.

// checkDifferential: the two halves of v need an even number of kv
// heads (DiffLlamaAttention refuses an odd one), the head pairs an even
// number of heads, and the projections are separate, unbiased by a
// latent, ungated, without sinks, dropout or windows (DiffLlama's).
func (a *Attention) checkDifferential(path string) error {
	if !a.Differential {
		return nil
	}
	if a.Kv()%2 != 0 || a.Heads%2 != 0 {
		return units.Errorf(path, "differential attention splits v's heads in two halves: kv_heads and heads must be even (got %d and %d)", a.Kv(), a.Heads)
	}
	if a.FusedQKV || a.OutputGate || a.GateProj || a.GateSoftplus || a.GateSigmoid || a.Sinks || a.Dropout > 0 || a.Window > 0 ||
		a.Softcap > 0 || a.VHeadDim > 0 || a.AdapterRank > 0 || a.Chunk > 0 || a.QKNorm || a.QKNormAfterRope || a.QKL2Norm {
		return units.Errorf(path, "differential attention is modelled as DiffLlama's alone: separate q, k and v, no gate, sinks, dropout, window, softcap, qk-norm or chunks")
	}
	return nil
}

// differentialLayoutError: tensor and context parallelism are refused
// (Attention.layoutRefusal).
func differentialLayoutError(path string) error {
	return &units.Error{Path: path, Msg: "tensor and context parallelism are not modelled for DiffLlama's differential attention (its group norm pairs head i with head i + heads/2)",
		Hint: "use tp=1 and cp=1 (FSDP shards it)"}
}

// differential lowers the two calls and their combination from the
// rotated q and k and v (kv heads), each as laid out in memory (kl, vl):
// o_proj's input, [.., heads x head_dim].
func (a *Attention) differential(b *core.Builder, q, k, v core.Value, s []int64, kl headLayout) core.Value {
	d, h, kv := a.Hd(), a.Heads, a.Kv()
	dt := b.Dtype(q)
	kvShape, hShape := core.WithLast(s, kv*d), core.WithLast(s, h*d)
	var outs []core.Value
	for _, half := range []string{"value_states1", "value_states2"} {
		vi := b.Ew("repeat", half, []core.Value{v}, kvShape, b.Dtype(v), "half of v's heads repeated to every kv head (chunk, then repeat(1, 2, 1, 1): a copy)")
		ki, kil, vil := k, kl, headMajor
		if !a.kvNative() && kv != h && !a.sdpaGQA(b) {
			ki, kil = expandKV(b, "k", k, hShape, kv), headMajor
			vi = expandKV(b, "v", vi, hShape, kv)
		}
		if a.Impl == "eager" {
			outs = append(outs, a.eager(b, q, ki, vi, s, kil, vil))
		} else {
			outs = append(outs, a.Fused(b, q, ki, vi, s))
		}
	}
	cat := b.Ew("cat", "attn_output", outs, core.WithLast(s, 2*h*d), dt, "the two calls' outputs concatenated along head_dim: [.., heads, 2 x head_dim]")
	lam := a.diffLambda(b, dt)
	pairs := append(append([]int64(nil), s[:len(s)-1]...), h/2, 2*d)
	im := b.AddOp("mul", "lambda_full", []core.Value{lam, cat})
	prod := b.Out(im, "lambda_full_x_attn_output2", pairs, dt, "λ times the second half of the heads")
	b.Op(im).Flops = float64(core.Numel(pairs))
	b.Save(im, lam, cat) // o2 is a view of the cat's output
	is := b.AddOp("sub", "sub", []core.Value{cat, prod})
	diff := b.Out(is, "attn_output", pairs, dt, "the first half of the heads less λ times the second")
	b.Op(is).Flops = float64(core.Numel(pairs))
	b.Op(is).Bytes += float64(b.Val(cat).Bytes/2 + b.Val(prod).Bytes)
	closeNorm := b.Scope("groupnorm")
	n := weightlessRMS(b, "attention output", diff)
	closeNorm()
	return b.Ew("mul", "lambda_init_scale", []core.Value{n}, hShape, dt, "(1 - lambda_init) times the normed output: o_proj's input")
}

// diffLambda is λ, the 0-dim scale of the second half: for each pair,
// exp(sum(λq * λk, dtype=fp32)) (exp saves its fp32 output), cast to
// q's dtype; their difference plus λinit, which the product saves.
func (a *Attention) diffLambda(b *core.Builder, dt units.DType) core.Value {
	d := a.Hd()
	var exps []core.Value
	for _, pair := range [][2]string{{"lambda_q1", "lambda_k1"}, {"lambda_q2", "lambda_k2"}} {
		pq, pk := b.Param(pair[0], []int64{d}, core.RoleQ), b.Param(pair[1], []int64{d}, core.RoleK)
		i := b.AddOp("exp", "exp_"+pair[0][len(pair[0])-1:], nil, pq, pk)
		e := b.Out(i, "lambda_"+pair[0][len(pair[0])-1:], []int64{}, units.FP32, "exp(sum(λq * λk)), fp32")
		b.Op(i).Flops = float64(3 * d)
		b.Save(i, e)
		exps = append(exps, b.Cast(e, dt, "λ in q's dtype"))
	}
	i := b.AddOp("sub", "lambda_full", exps)
	return b.Out(i, "lambda_full", []int64{}, dt, "λ1 - λ2 + λinit")
}
