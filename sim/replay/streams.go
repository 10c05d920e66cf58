package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Streams: which allocations of a step happen on which CUDA stream. The
// caching allocator keeps a pool per stream (alloc/streams.go), so memory
// one stream cached never serves another: what the side streams hold at
// their fullest adds to reserved memory beside the compute stream's.
//
//   - FSDP1 (torch/distributed/fsdp, PyTorch 2.0-2.3): the padded
//     unsharded FlatParameter is allocated inside `with
//     stream(unshard_stream): handle.unshard()` (_runtime_utils.py
//     _unshard), on the unshard stream; at reshard it is recorded on the
//     compute stream before its storage is freed
//     (_free_unsharded_flat_param: _no_dispatch_record_stream(...,
//     current_stream())). The gradient autograd computes on the compute
//     stream is reduce-scattered on the post-backward stream, which
//     allocates the sharded gradient (new_sharded_grad, kept as
//     _saved_grad_shard until the optimizer), and is recorded on that
//     stream before it is dropped (_post_backward_hook:
//     _no_dispatch_record_stream(autograd_computed_grad,
//     post_backward_stream)). The rate limiter (limit_all_gathers=True,
//     the default) makes the CPU wait, before each unshard, for the
//     free event of the unit resharded two reshards earlier
//     (_free_event_queue, two all-gathers in flight); memsh takes that
//     wait as the point where every stream has done the work issued
//     before that reshard (side streams are taken to keep up with the
//     compute stream) and, at the end of the backward, as all work done.
//     pre_unshard allocates _mp_shard under parameter mixed precision and,
//     with CPUOffload, the GPU copy of the shard on a stream of its own, the
//     pre-unshard stream ("allocations and writes for CPU offloading (H2D
//     copy) and mixed precision (low precision cast)", _init_streams),
//     and the all-gather records it on the unshard stream
//     (_all_gather_flat_param: _no_dispatch_record_stream).
//   - FSDP2 (torch.distributed.fsdp.fully_shard, _fsdp_collectives.py):
//     foreach_all_gather allocates the all-gather output (and the input
//     it is a view of) on the all-gather copy-in stream; the copy-out
//     allocates the unsharded parameters on the compute stream. In
//     foreach_reduce the reduce-scatter input is allocated on the compute
//     stream and the output, which becomes the sharded gradient (a view
//     of it, or its cast to the parameter dtype on the same stream), on
//     the reduce-scatter stream. FSDP2 uses no record_stream: it keeps
//     references and waits on events, so its blocks return to their own
//     stream's pool when freed.
//   - torchtune's OffloadActivations (training/_activation_offloading.py,
//     use_streams=True): in the backward each offloaded activation comes
//     back to the GPU inside `with self.s1:`, so its copy is allocated on
//     the offload stream.
//   - Megatron's overlapped shared expert (parallel(shared_expert_overlap=
//     True), --moe-shared-expert-overlap): SharedExpertMLP runs every
//     step of its forward under torch.cuda.stream(self.stream)
//     (shared_experts.py at core_v0.12.0 and core_v0.13.0: the gate, the
//     all-gather, both linears, the reduce-scatter, the gate's product),
//     and autograd runs each op's backward on its forward's stream: their
//     outputs, gradients and the stream's own cuBLAS workspaces come from
//     that stream's pools (OpInfo.SideStream). Nothing is recorded on
//     another stream, so a freed block goes back to the side stream's
//     pool at once.
//   - torch's micro-pipeline TP (parallel(async_tp=True), core/async_tp.go)
//     runs half of its chunks' copies and GEMMs on a backend stream of
//     its own, into outputs allocated on the compute stream: that stream
//     allocates only its GEMMs' cuBLAS (and, under float8, cuBLASLt)
//     workspaces, one per thread (async_tp.go).
//   - DDP's buckets are allocated on the compute stream when the reducer
//     is built and reduced in place by ProcessGroupNCCL's own stream,
//     which allocates nothing; Megatron's tensor-parallel collectives run
//     in place on the compute stream. Neither adds a pool.

// The streams a step allocates on.
const (
	StreamCompute       = alloc.DefaultStream
	StreamAllGather     = alloc.Stream(1) // FSDP1's unshard stream, FSDP2's all-gather copy-in stream
	StreamReduceScatter = alloc.Stream(2) // FSDP1's post-backward stream, FSDP2's reduce-scatter stream, DeepSpeed ZeRO-2's reduction_stream (overlap_comm)
	StreamOffload       = alloc.Stream(3) // torchtune's activation-offload stream
	StreamGraphPool     = alloc.Stream(4) // the private pool of torch.compile's CUDA graph trees (cudagraphs.go)
	StreamSharedExpert  = alloc.Stream(5) // Megatron's overlapped shared expert (OpInfo.SideStream)
	StreamPreUnshard    = alloc.Stream(6) // FSDP1's pre-unshard stream: _mp_shard, CPUOffload's copies of the shards to the GPU (fsdp1_offload.go)
	StreamAsyncTP       = alloc.Stream(7) // async TP's backend stream: its GEMMs' cuBLAS workspaces (async_tp.go)
	StreamNCCL          = alloc.Stream(8) // ProcessGroupNCCL's stream: allocates nothing, holds what it was recorded on (nccl_record.go)
	numStreams          = 9
)

var streamNames = [numStreams]string{"compute", "all_gather", "reduce_scatter", "offload", "cuda_graph_pool", "shared_expert", "pre_unshard", "async_tp", "nccl"}

// StreamName is the stream's name in reports: compute, all_gather,
// reduce_scatter, offload, cuda_graph_pool, shared_expert, pre_unshard,
// async_tp or nccl.
func StreamName(s alloc.Stream) string {
	if int(s) < len(streamNames) {
		return streamNames[s]
	}
	return "unknown"
}

// onSideStream runs op's allocations, forward, recompute or backward, on
// its side stream when it has one (OpInfo.SideStream: autograd runs an
// op's backward on the stream of its forward), and an op without one on
// the compute stream when a side op's backward recomputes it; the
// returned function goes back to the stream before. A matmul on the side
// stream makes its thread's cuBLAS workspace there at its first call
// (cublas.go); thread is 0 in the forward, 1 in the backward and its
// recompute.
func (r *Replay) onSideStream(op *core.OpInfo, thread int) func() {
	s := StreamSharedExpert
	switch {
	case op.SideStream:
	case r.stream == StreamSharedExpert:
		s = StreamCompute
	default:
		return func() {}
	}
	prev := r.stream
	r.stream = s
	if op.SideStream {
		r.sideStreamCublas(op, thread)
	}
	return func() { r.stream = prev }
}

// allocateOn records one allocation on stream s.
func (r *Replay) allocateOn(s alloc.Stream, a Alloc) int32 {
	prev := r.stream
	r.stream = s
	id := r.allocate(a)
	r.stream = prev
	return id
}

// recordStream marks tensor id as used by stream s (record_stream).
func (r *Replay) recordStream(id int32, s alloc.Stream) {
	if b := r.live.at(id).blk; b != 0 {
		r.alloc.RecordStream(r.alloc.Block(b), s)
	}
}

// synchronize says every stream has done the work issued up to mark. The
// frees it completes change neither allocated nor reserved memory, so it
// adds no timeline point (the timeline has one per allocation and free
// request, as the trace: package live pairs them).
func (r *Replay) synchronize(mark int64) {
	for s := alloc.Stream(0); s < numStreams; s++ {
		r.alloc.Synchronize(s, mark)
	}
}

// allocOn is d.alloc on stream s.
func (d *distState) allocOn(r *Replay, s alloc.Stream, name string, shape []int64, dt units.DType, bytes int64, cat core.Category, why string) int32 {
	return r.allocateOn(s, Alloc{Tensor: name, Shape: shape, DType: dt, Bytes: bytes, Why: why, Cat: cat})
}

// allocUnit allocates a on stream s: a communication tensor of n elements
// of unit un's, named un.name+a.Tensor and explained whyHead+a.Why+whyTail,
// joined only when the report keeps the allocation (allocParts): a step
// of many units gathers and reduces each of them.
func (d *distState) allocUnit(r *Replay, s alloc.Stream, un *gatherUnit, n int64, a Alloc, whyHead, whyTail string) int32 {
	a.Cat = core.CatComm
	parts := allocParts{tensor: un.name, why: whyHead, whyTail: whyTail, dim: n}
	if n <= 0 {
		a.Shape, parts.dim = []int64{n}, 0
	}
	prev := r.stream
	r.stream = s
	id := r.allocateParts(a, parts)
	r.stream = prev
	return id
}

// rateLimit is FSDP1's limit_all_gathers before an unshard: with two
// reshards' free events queued, the CPU waits for the older one.
func (d *distState) rateLimit(r *Replay) {
	if len(r.freeEvents) < 2 {
		return
	}
	r.synchronize(r.freeEvents[0])
	r.freeEvents = r.freeEvents[1:]
}

// freeUnsharded releases FSDP1's unsharded FlatParameter id after
// recording it on the compute stream, and queues the reshard's free event.
func (d *distState) freeUnsharded(r *Replay, id int32) {
	r.recordStream(id, StreamCompute)
	r.release(id)
	r.freeEvents = append(r.freeEvents, r.alloc.Mark())
}

// releaseAllGatherOutput frees FSDP2's all-gather output once it is
// copied out; in the forward, wait_for_unshard keeps it until the next
// unit's copy-out "to allow for overlap of this copy-out with next
// all-gather" (_fsdp_param_group.py: comm_ctx.all_gather_state, when the
// group's training state is FORWARD), so the all-gather stream holds two.
func (d *distState) releaseAllGatherOutput(r *Replay, id int32) {
	if r.phase == PhaseForward {
		r.keptAllGather = id
		return
	}
	r.release(id)
}

// freeKeptAllGatherOutput frees the all-gather output the forward kept.
func (d *distState) freeKeptAllGatherOutput(r *Replay) { r.freeKeptAllGather() }

// freeKeptAllGather frees the all-gather output the forward kept, as the
// next copy-out does, or the root's post-forward at the end of the
// forward (_fsdp_state.py _post_forward: "Free the last all-gather result
// if needed").
func (r *Replay) freeKeptAllGather() {
	if r.keptAllGather != none {
		r.release(r.keptAllGather)
		r.keptAllGather = none
	}
}
