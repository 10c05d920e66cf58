package replay

import "github.com/memsh/memsh/sim/core"

// What ProcessGroupNCCL's record_stream holds (issues 19 and 28).
//
// Before PyTorch made TORCH_NCCL_AVOID_RECORD_STREAMS its default
// (core.Runtime.NCCLRecordStreams), a collective run on ProcessGroupNCCL's
// own stream calls record_stream on its tensors: collective() on the
// inputs, alltoall_base's lambda on the output ("See [Sync Streams]",
// torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; pytorch#46603 added
// the output's). When such a tensor is freed the caching allocator
// records an event on the NCCL stream (insert_events) and lends the block
// again only once that event has completed (process_events, at the start
// of each malloc; alloc/streams.go). Allocated memory drops at the free;
// reserved memory does not: requests made meanwhile need other blocks.
//
// The event completes when the device has run the NCCL stream up to the
// free. memsh has no device clock in the replay, so it holds the block
// until the host has waited for the device, which it knows of at:
//
//   - Megatron-Core's dropless alltoall dispatcher in each MoE layer's
//     forward and recompute (core.OpInfo.Syncs on the permute,
//     nn/moe_megatron_sync.go megatronDispatchSyncs; without permute
//     fusion the masked_selects' too): the host waits for an
//     event recorded after the compute stream reached the router's counts
//     (token_dispatcher.py _maybe_dtoh_and_synchronize at core_v0.13.0;
//     core_r0.11.0's current_stream().synchronize()). The compute stream
//     had waited for every earlier all-to-all (all_to_all_single with
//     async_op=False: the work's wait() makes the current stream wait for
//     the NCCL stream), so every event recorded before then is complete;
//   - the optimizer step, which reads the gradient norm and found_inf on
//     the host (Megatron's clip_grad_norm .item(), the mixed-precision
//     optimizer's found_inf check).
//
// This is the most the hold can last: where the device keeps pace with
// the host between two syncs, blocks come back sooner. Under full
// recompute every MoE layer's backward starts with its recompute's sync,
// so a hold spans one layer; without recompute the backward has no sync
// (the split sizes are on the host already) and what the backward's
// all-to-alls free waits until the next micro-batch's first MoE layer or
// the optimizer step.

// recordOnNCCL records tensor ids on ProcessGroupNCCL's stream when op is
// such a collective on a runtime that records streams.
func (r *Replay) recordOnNCCL(op *core.OpInfo, ids ...int32) {
	if !op.NCCLStream || !r.recordsNCCL() {
		return
	}
	for _, id := range ids {
		if id != none {
			r.recordStream(id, StreamNCCL)
		}
	}
}

// hostWaited says the host has waited for the device: every block
// recorded on the NCCL stream and freed before now is free for reuse.
func (r *Replay) hostWaited() {
	if r.recordsNCCL() {
		r.Rep.NCCLHeld = max(r.Rep.NCCLHeld, r.alloc.PendingOn(StreamNCCL))
		r.alloc.Synchronize(StreamNCCL, r.alloc.Mark())
	}
}

// recordsNCCL reports whether ProcessGroupNCCL records its collectives'
// tensors on its stream: a runtime before the stashing default, without
// TORCH_NCCL_AVOID_RECORD_STREAMS=1 (train(nccl_avoid_record_streams=True)).
func (r *Replay) recordsNCCL() bool {
	return r.Plan.Runtime.NCCLRecordStreams && !r.Plan.RuntimeMemory.NCCLAvoidRecordStreams
}
