package nn

import "github.com/memsh/memsh/sim/core"

// Megatron-Core's MoE host syncs: where the host waits for the GPU in a
// MoE layer's forward with the alltoall token dispatcher and grouped
// experts (core.OpInfo.Syncs, timing/host_sync.go).
//
// The dispatcher's own sync. The all-to-all's split sizes and the grouped
// GEMM's tokens per expert (Transformer Engine's GroupedLinear takes
// m_splits as a host list: experts.py TEGroupedMLP.forward,
// tokens_per_expert.tolist()) are device counts the host must read.
// MoEAlltoAllTokenDispatcher.preprocess picks one point to wait for them,
// the earliest any setting needs (megatron/core/transformer/moe/
// token_dispatcher.py, core_v0.12.0 d580efc68 ll. 356-477, core_v0.13.0
// c550cf6c4 ll. 424-545):
//   - "before_permutation_1" with a capacity factor and no padding (the
//     permute's output size), or under 0.13's --moe-router-padding-for-
//     fp8: neither is a memsh setting (memsh's capacity is drop-and-pad);
//   - "before_ep_alltoall" with ep or expert tp > 1: the split sizes;
//   - "before_permutation_2" with more than one local expert and no
//     --moe-permute-fusion: the unfused chunk sort's split sizes;
//   - "before_finish" otherwise: the tokens per expert for the experts;
//   - "no_sync" with --moe-pad-expert-input-to-capacity: every size is
//     the capacity, known on the host (memsh's Capacity > 0).
// The copies run on a side stream after the router
// (_maybe_dtoh_and_synchronize, ll. 671-708 at core_v0.12.0,
// cuda_dtoh_stream.synchronize(); ll. 817-855 at core_v0.13.0,
// d2h_event.synchronize()); core_r0.11.0 (59055868f) copies
// non_blocking and calls torch.cuda.current_stream().synchronize() at the
// point (ll. 508-559), "before_ep_alltoall" also at ep 1 with more than
// one local expert.
//
// The unfused permute (--moe-permute-fusion off, parallel(
// permute_fusion=False)): moe_utils.py permute builds its indices with
// token_indices.masked_select(routing_map) (l.281 at core_v0.12.0, l.314
// at core_v0.13.0), and 0.13 permutes the probs with it the same way
// (l.317); 0.12's unpermute weights the rows by
// probs.T.contiguous().masked_select(...) (l.349; 0.13's combine passes
// no probs). masked_select on CUDA is at::index_out with the boolean mask,
// whose nonzero reads its count on the host (aten/src/ATen/native/cuda/
// IndexKernel.cu, masked_select_out_cuda_impl): two syncs more a layer
// either way. Not modelled: core_r0.11.0's blocking copy of
// num_global_tokens_per_local_expert in preprocess (l.466, non_blocking=
// False, with more than one local expert), one more just before the
// permute's, about one sync's latency (15 µs).
//
// The backward makes none: the all-to-alls and the expert-tp gather
// reuse the host's split sizes, the grouped GEMM its m_splits, and
// masked_select's backward is masked_scatter, whose size check runs on
// the device (IndexKernel.cu, launch_masked_scatter_kernel). A recompute
// reruns the forward's (timing/host_sync.go charges their latency).
// Nor does the router: its aux loss and tracker stay on the device
// (moe_utils.py save_to_aux_losses_tracker); track_moe_metrics reads them
// once a step (training.py training_log), outside the layers.
// The allgather dispatcher (MoEAllGatherTokenDispatcher,
// local_map.sum(dim=0).long().cpu() in token_permutation) syncs once a
// layer too, after its all-gather; memsh lowers the alltoall one only.

// megatronDispatchSyncs is the dispatcher's own sync, once a layer's
// forward.
const megatronDispatchSyncs = 1

// megatronSyncs is where a Megatron MoE layer's forward syncs.
type megatronSyncs struct {
	permute  int32 // on the permute: the unfused masked_selects, and the dispatcher's sync before the all-to-all
	experts  int32 // on the last op before the experts: the dispatcher's sync at before_permutation_2 or before_finish
	unpermut int32 // on the unpermute: 0.12's unfused weighting
}

// megatronSyncPlan is the syncs of a Megatron grouped layer's forward
// with local experts on this rank (nothing for other experts, or with a
// capacity factor: drop-and-pad syncs nowhere).
func (m *MoE) megatronSyncPlan(b *core.Builder, local int64) megatronSyncs {
	if !m.megatronGrouped(b) || m.Capacity > 0 {
		return megatronSyncs{}
	}
	var s megatronSyncs
	unfused := b.Par.NoPermuteFusion
	if unfused {
		s.permute = 1 // the indices' masked_select
		if b.Par.UnpermuteProbs {
			s.unpermut = 1 // 0.12: the probs' masked_select in the unpermute
		} else {
			s.permute++ // 0.13: the probs' masked_select in the permute
		}
	}
	switch {
	case b.Par.Epn() > 1 || b.Par.Etpn() > 1:
		s.permute += megatronDispatchSyncs // before_ep_alltoall
	case unfused && local > 1:
		s.permute += megatronDispatchSyncs // before_permutation_2: the permute is the op before the chunk sort at ep 1
	default:
		s.experts = megatronDispatchSyncs // before_finish
	}
	return s
}

// Total is the syncs a layer's forward makes.
func (s megatronSyncs) Total() int32 { return s.permute + s.experts + s.unpermut }
