package nn

import "github.com/memsh/memsh/sim/core"

// Megatron-Core 0.13's grouped experts weight their rows by the routing
// probabilities inside the activation, not in the unpermute
// (megatron/core/transformer/moe at core_v0.13.0):
// token_dispatcher.py MoEAlltoAllTokenDispatcher permutes the probs with
// the tokens (dispatch_preprocess) and sends them through the same
// all-to-all (token_dispatch); experts.py TEGroupedMLP.forward applies
// them in weighted_bias_swiglu_impl (WeightedSwiGLUFunction saves its
// input and the probs, core/megatron_kernels.go), or multiplies the
// activation by them without the fusion; combine_postprocess then
// unpermutes with no probs, so the unpermute keeps only its index map,
// not a copy of the experts' outputs. core_r0.12.0 still weighted in the
// unpermute, keeping the outputs: lowerDispatched's path for the other
// implementations.

// probsInExperts reports whether the routing weights go to the experts:
// Megatron's grouped experts (impl "grouped" under precision "megatron").
func (m *MoE) probsInExperts(b *core.Builder) bool {
	return m.impl() == MoEGrouped && b.MegatronKernels()
}

// lowerWeightedExperts runs the experts on the dispatched rows xs with
// the routing weights applied in their activation, brings the rows back
// and sums them per token.
func (m *MoE) lowerWeightedExperts(b *core.Builder, x, xs core.Value, r routing, send, recv, local int64) core.Value {
	pg := b.AddOp("gather", "permute_probs", []core.Value{r.weights, r.idx})
	ps := b.Out(pg, "permuted_probs", []int64{send, 1}, b.Dtype(r.weights), "routing weights of the routed copies, sorted by expert")
	b.Save(pg, r.idx)
	ps = expertAllToAll(b, "dispatch_probs", ps, recv)
	y := m.groupedFfn(b, xs, local, ps)
	y = expertAllToAll(b, "combine", y, send)
	c := b.AddOp("index_add", "unpermute", []core.Value{y, r.idx})
	out := b.Out(c, "combined", b.Shape(x), b.Dtype(y), "expert outputs summed per token")
	b.Save(c, r.idx)
	b.Op(c).Flops = float64(send) * float64(m.Dim)
	return out
}
