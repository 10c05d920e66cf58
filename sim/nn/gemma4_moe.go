package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gemma4MoE is the expert half of a Gemma 4 MoE decoder layer (the 26B
// A4B; Gemma4TextDecoderLayer with enable_moe_block, Gemma4TextRouter and
// Gemma4TextExperts in transformers' models/gemma4/modeling_gemma4.py,
// 5.17.0). It reads the layer's residual stream x, beside the dense MLP
// that reads pre_feedforward_layernorm(x) (the hf reader sums the two in
// an nn.Parallel):
//
//	router:  h = norm(x) * scale * hidden^-0.5        (norm: Gemma4Norm without weight)
//	         p = softmax(proj(h), fp32); w, idx = topk(p, k)
//	         w = w / w.sum(-1) * per_expert_scale[idx]
//	experts: y = experts(pre_feedforward_layernorm_2(x), idx, w)
//	         post_feedforward_layernorm_2(y)
//
// router.proj is an nn.Linear (quantization and LoRA reach it); scale
// ([hidden]) and per_expert_scale ([experts]) are parameters. The experts
// are 3-D parameters run as MoE.Impl says (transformers 5's grouped_mm by
// default, or the loop over them), as for the other families.
type Gemma4MoE struct {
	Dim, Hidden, Experts, TopK int64
	Act                        string // the experts' gated activation (geglu)
	Impl                       string // MoEGroupedMM (default) or MoEFusedLoop
}

func (g *Gemma4MoE) Kind() string           { return "gemma4_moe" }
func (g *Gemma4MoE) Label() string          { return "" }
func (g *Gemma4MoE) DefaultName() string    { return "" } // its modules sit in the decoder layer
func (g *Gemma4MoE) Children() []core.Layer { return nil }
func (g *Gemma4MoE) InDim() int64           { return g.Dim }
func (g *Gemma4MoE) OutDim() int64          { return g.Dim }

// moe is the experts as nn.MoE lowers them.
func (g *Gemma4MoE) moe() *MoE {
	impl := g.Impl
	if impl == "" {
		impl = MoEGroupedMM
	}
	return &MoE{Name: "experts", Dim: g.Dim, Hidden: g.Hidden, Experts: g.Experts, TopK: g.TopK, Act: g.Act, Impl: impl, WeightsFP32: true}
}

func (g *Gemma4MoE) Params() int64 {
	return g.Dim*g.Experts + g.Dim + g.Experts + g.Experts*g.moe().expertMLP().Params() + 2*g.Dim
}

func (g *Gemma4MoE) Summary() string {
	return fmt.Sprintf("%d experts (top-%d), %d -> %d, %s", g.Experts, g.TopK, g.Dim, g.Hidden, g.Act)
}

func (g *Gemma4MoE) Validate(path string) error {
	if err := g.moe().Validate(path); err != nil {
		return err
	}
	if !(&MLP{Act: g.Act}).gated() {
		// Gemma4TextExperts always splits gate_up_proj in two halves
		return units.Errorf(path, "Gemma 4's experts are gated (gate_up_proj): act must be geglu or swiglu (got %q)", g.Act)
	}
	if g.Impl != "" && g.Impl != MoEGroupedMM && g.Impl != MoEFusedLoop {
		return units.Errorf(path, "Gemma 4's experts run as %q or %q (got %q)", MoEGroupedMM, MoEFusedLoop, g.Impl)
	}
	return nil
}

// CheckLayout: the experts are lowered on one rank with every expert;
// tensor and expert parallelism are not modelled for this block yet.
func (g *Gemma4MoE) CheckLayout(path string, par core.Parallelism) error {
	if par.TP > 1 || par.EP > 1 {
		return &units.Error{Path: path, Msg: "tensor and expert parallelism are not modelled for Gemma 4's MoE block",
			Hint: "use tp=1 and ep=1 (FSDP shards it)"}
	}
	return nil
}

func (g *Gemma4MoE) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != g.Dim {
		panic(core.ShapeMismatch(b, "gemma4_moe", g.Dim, b.Last(x)))
	}
	m := g.moe()
	s := b.Shape(x)
	T := core.Rows(s)
	r := g.route(b, x, T)
	h := gemma4Norm(b, "pre_feedforward_layernorm_2", x, g.Dim, true)
	var y core.Value
	if m.Impl == MoEGroupedMM {
		y = m.lowerGroupedMM(b, h, r)
	} else {
		y = m.lowerLoop(b, h, r)
	}
	b.Val(y).Shape = s
	return gemma4Norm(b, "post_feedforward_layernorm_2", y, g.Dim, true)
}

// route lowers Gemma4TextRouter on the residual stream x ([T, hidden]).
func (g *Gemma4MoE) route(b *core.Builder, x core.Value, T int64) routing {
	E, k := g.Experts, g.TopK
	r := routing{tokens: T, first: int32(len(b.P.Ops))}
	defer b.Scope("router")()
	h := gemma4Norm(b, "norm", x, g.Dim, false)
	scale := b.Param("scale", []int64{g.Dim}, core.RoleRouter)
	is := b.AddOp("mul", "scale", []core.Value{h}, scale)
	hs := b.Out(is, "scaled", b.Shape(h), b.Dtype(h), "router input times scale")
	if b.Trainable(scale) {
		b.Save(is, h)
	}
	b.Op(is).Flops = float64(core.Numel(b.Shape(h)))
	hs = b.Ew("mul", "root_size", []core.Value{hs}, b.Shape(hs), b.Dtype(hs), "router input times hidden^-0.5")
	logits := b.Linear("proj", core.RoleRouter, hs, g.Dim, E, false)
	probs := b.Cast(logits, units.FP32, "router logits in fp32 for the softmax")
	sm := b.AddOp("softmax", "softmax", []core.Value{probs})
	p := b.Out(sm, "router_probabilities", []int64{T, E}, units.FP32, "router probabilities (fp32, saved)")
	b.Save(sm, p)
	tk := b.AddOp("topk", "topk", []core.Value{p})
	w := b.Out(tk, "top_k_weights", []int64{T, k}, units.FP32, "top-k router probabilities")
	r.idx = b.Out(tk, "top_k_index", []int64{T, k}, units.INT64, "top-k expert indices")
	b.Val(r.idx).Grad = false
	b.Save(tk, r.idx)
	// top_k_weights /= sum: in place; div_'s backward reads the divisor
	// and the dividend as it was, which autograd clones before the
	// division overwrites it (original_self).
	sum := b.Ew("sum", "topk_sum", []core.Value{w}, []int64{T, 1}, units.FP32, "sum of the top-k weights")
	dv := b.AddOp("div", "renormalise", []core.Value{w, sum})
	orig := b.Out(dv, "top_k_weights_original", []int64{T, k}, units.FP32, "top-k weights before the in-place division (autograd's clone)")
	wn := b.Out(dv, "top_k_weights_normed", []int64{T, k}, units.FP32, "top-k weights renormalised (in place)")
	b.Val(orig).Grad = false
	b.Save(dv, orig, sum)
	// per_expert_scale[idx]: a gather of the parameter, saved by the product.
	pe := b.Param("per_expert_scale", []int64{E}, core.RoleRouter)
	gi := b.AddOp("index", "per_expert_scale", []core.Value{r.idx}, pe)
	ps := b.Out(gi, "per_expert_scale_g", []int64{T, k}, b.Prec.Params, "per_expert_scale of the chosen experts")
	b.Val(ps).Grad = b.Trainable(pe)
	r.weights = b.Mul("routing_weights", wn, ps)
	return r
}
