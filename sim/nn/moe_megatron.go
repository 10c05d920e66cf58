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
// unpermute (parallel(unpermute_probs=True)): token_dispatcher.py
// MoEAlltoAllTokenDispatcher.token_unpermutation passes probs=self.probs
// to moe_utils.py unpermute, which multiplies the experts' outputs by the
// permuted probs (unfused; Transformer Engine's fused unpermute with
// merging_probs likewise saves its input for the probs' gradient), so the
// outputs, [routed rows, hidden], stay until the backward; the experts'
// SwiGLU is bias_swiglu_impl, which keeps its input alone.

// megatronGrouped reports whether the layer is Megatron's grouped experts
// (impl "grouped" under precision "megatron") with its alltoall
// dispatcher's steps, whatever the release.
func (m *MoE) megatronGrouped(b *core.Builder) bool {
	return m.impl() == MoEGrouped && b.MegatronKernels()
}

// onNCCLStream marks the all-to-all that made v as ProcessGroupNCCL's
// (core.OpInfo.NCCLStream): Megatron-Core's _AllToAll calls
// torch.distributed.all_to_all_single (tensor_parallel/mappings.py at
// core_v0.12.0 and core_v0.13.0), forward and backward. Nothing without
// expert parallelism (no all-to-all).
func (m *MoE) onNCCLStream(b *core.Builder, v core.Value) {
	if b.Par.Epn() > 1 {
		b.Op(b.Val(v).Producer).NCCLStream = true
	}
}

// probsInExperts reports whether the routing weights go to the experts:
// Megatron-Core 0.13's grouped experts.
func (m *MoE) probsInExperts(b *core.Builder) bool {
	return m.megatronGrouped(b) && !b.Par.UnpermuteProbs
}

// Under expert tensor parallelism (expert tp = tp > 1, sequence parallel)
// Megatron's alltoall dispatcher routes each rank's own sequence-parallel
// tokens, exchanges them over the expert-parallel group, and only then
// all-gathers the received rows (and their probs) over the expert
// tensor-parallel group; the experts' partial outputs are reduce-scattered
// back before the combine all-to-all (token_dispatcher.py at core_v0.13.0:
// dispatch_postprocess's gather_from_sequence_parallel_region over
// self.tp_group, combine_preprocess's reduce_scatter_to_sequence_parallel_
// region; core_r0.12.0 the same). The all-to-alls thus carry a rank's own
// tokens, 1/tp of what gathering the layer input first would send.

// gathersAfterDispatch reports whether the layer runs that path: Megatron's
// grouped experts with expert parallelism and expert tp = tp > 1 under
// sequence parallelism.
func (m *MoE) gathersAfterDispatch(b *core.Builder) bool {
	return m.megatronGrouped(b) && m.Capacity == 0 && b.Par.Epn() > 1 && b.Par.Tpn() > 1 && b.Par.Etpn() == b.Par.Tpn() && b.Par.SP()
}

// lowerWeightedExperts runs the experts on the dispatched rows xs with
// the routing weights applied in their activation, brings the rows back
// and sums them per token.
//
// With unpermute_probs (core_r0.12.0) the probs stay home: the experts run
// unweighted and the unpermute weights their outputs, keeping them.
//
// syncs places the layer's host syncs after the permute's (moe_megatron_sync.go):
// the dispatcher's before the experts, the unpermute's.
func (m *MoE) lowerWeightedExperts(b *core.Builder, x, xs core.Value, r routing, send, recv, local int64, syncs megatronSyncs) core.Value {
	inExperts := m.probsInExperts(b)
	ps, sentProbs := core.NoValue, core.NoValue
	received := xs
	if inExperts {
		pg := b.AddOp("gather", "permute_probs", []core.Value{r.weights, r.idx})
		ps = b.Out(pg, "permuted_probs", []int64{send, 1}, b.Dtype(r.weights), "routing weights of the routed copies, sorted by expert")
		sentProbs = ps
		b.Save(pg, r.idx)
		ps = expertAllToAll(b, "dispatch_probs", ps, recv)
		m.onNCCLStream(b, ps)
	}
	etp := m.gathersAfterDispatch(b)
	if etp {
		xs = b.TpGather(xs)
		if inExperts {
			ps = b.TpGather(ps)
		}
	}
	if local > 1 {
		xs = sortChunks(b, "sort_chunks", xs, "received rows sorted by local expert")
		if inExperts {
			ps = sortChunks(b, "sort_chunks_probs", ps, "received probs sorted by local expert")
		}
	}
	// before_finish: the dispatcher's last op before the experts.
	b.Op(int32(len(b.P.Ops) - 1)).Syncs += syncs.experts
	y := m.groupedFfn(b, xs, local, ps)
	if local > 1 {
		y = sortChunks(b, "unsort_chunks", y, "expert outputs back in source-rank order")
	}
	if etp {
		y = reduceScatterInRouterDType(b, y)
	}
	y = expertAllToAll(b, "combine", y, send)
	m.markRouted(b, received, y, recv, sentProbs)
	m.onNCCLStream(b, y)
	if !inExperts {
		// core_r0.12.0: Transformer Engine's moe_unpermute (the
		// --moe-permute-fusion path every run here sets) reads the probs
		// in their dtype and writes the output in the input's
		// (transformer_engine/pytorch/permutation.py
		// _moe_unpermute_mask_map, triton/permutation.py
		// unpermute_with_mask_map at v2.3: torch.empty(..., dtype=
		// inp.dtype)), saving both as they are. Not modelled: the unfused
		// unpermute (moe_utils.py l.349-355 at core_v0.12.0), whose
		// product with fp32 probs promotes the routed rows to fp32
		// before the scatter-add ("Use --moe-permute-fusion flag to
		// avoid this extra memory allocation").
		out := weightedUnpermute(b, x, y, r.weights, r.idx, send, m.Dim)
		b.Op(b.Val(out).Producer).Syncs = syncs.unpermut
		return out
	}
	c := b.AddOp("index_add", "unpermute", []core.Value{y, r.idx})
	out := b.Out(c, "combined", b.Shape(x), b.Dtype(y), "expert outputs summed per token")
	b.Save(c, r.idx)
	b.Op(c).Flops = float64(send) * float64(m.Dim)
	return out
}

// reduceScatterInRouterDType is the combine's reduce-scatter of the
// experts' partial outputs over the expert tensor-parallel group, which
// Megatron runs in the probs' dtype: "The precision of TP reduce_scatter
// should be the same as the router_dtype",
// reduce_scatter_to_sequence_parallel_region(hidden_states.to(
// self.probs.dtype), ...).to(hidden_states.dtype)
// (megatron/core/transformer/moe/token_dispatcher.py l.624-629 at
// core_v0.12.0, d580efc68, in token_unpermutation; l.734-738 at
// core_v0.13.0, c550cf6c4, in combine_preprocess). With
// --moe-router-dtype fp32 the probs are fp32 (moe_route.go routerDType):
// the outputs are copied to fp32, reduce-scattered (and their gradient
// all-gathered, the backward of the reduce-scatter, in fp32: the cast
// back's backward casts it up) at twice the bf16 bytes, and the shard
// cast back. Without it the probs are in the input's dtype and nothing
// is cast.
func reduceScatterInRouterDType(b *core.Builder, y core.Value) core.Value {
	dt := b.Dtype(y)
	y = b.Cast(y, routerDType(b, dt), "experts' outputs in the router's dtype for the expert-tp reduce-scatter")
	y = b.TpReduce("experts", y)
	return b.Cast(y, dt, "reduce-scattered experts' outputs back in their dtype")
}

// weightedUnpermute weights the experts' outputs y by the routing weights
// and sums them per token: the product saves both operands (the outputs
// for the weights' gradient, the weights for the outputs'), the
// scatter-add its indices.
func weightedUnpermute(b *core.Builder, x, y, w, idx core.Value, send, dim int64) core.Value {
	c := b.AddOp("index_add", "unpermute", []core.Value{y, w, idx})
	out := b.Out(c, "combined", b.Shape(x), b.Dtype(y), "expert outputs weighted and summed per token")
	if b.Grad(w) {
		b.Save(c, y)
	}
	if b.Grad(y) {
		b.Save(c, w)
	}
	b.Save(c, idx)
	b.Op(c).Flops = 2 * float64(send) * float64(dim)
	return out
}

// sortChunks is Megatron's second permutation (token_dispatcher.py at
// core_v0.13.0, sort_chunks_by_idxs in dispatch_postprocess and
// combine_preprocess, with more than one local expert): the rows an
// all-to-all brings arrive grouped by source rank, then by expert; the
// grouped GEMM wants them by expert. Unfused it splits them and
// concatenates the chunks in the other order (torch.cat); with
// moe_permute_fusion Transformer Engine's moe_sort_chunks_by_index does
// the same copy in one kernel. Either writes a new tensor of the rows and
// saves nothing the backward needs beyond the split sizes; the backward
// copies the gradient back (timing/moe.go prices both copies).
func sortChunks(b *core.Builder, name string, x core.Value, why string) core.Value {
	g := b.AddOp("chunk_copy", name, []core.Value{x})
	y := b.Out(g, name, b.Shape(x), b.Dtype(x), why)
	b.Op(g).Bytes += float64(b.Val(x).Bytes) // read and written
	return y
}
