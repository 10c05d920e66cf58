// Package replay replays one training step of a lowered program
// (core.Program) on one GPU as a timeline of allocations and frees through
// the caching-allocator model (sim/alloc), and fills the Report: peak
// allocated and reserved memory, what nvidia-smi would show, the breakdown
// at the peak, the peak op, the largest allocation and the first one that
// fails, in PyTorch's words.
//
// Run replays setup (parameters, master weights, optimizer state in the
// steady state or made by the first step, the batch), an optional
// validation pass, the forward (freeing each input after its last use
// unless saved, autocast's weight cache), the backward (recomputing
// checkpointed regions, activation and parameter gradients; a parameter
// read by several ops, as a tied or chunked output head is, has their
// gradients summed out of place as the autograd engine's input buffer
// sums them) and the optimizer step with its temporaries.
//
// The distributed layouts that change what a GPU holds over the step live
// here too, because they are allocation timelines: DDP's buckets,
// Megatron's gradient buffer and distributed optimizer, ZeRO 1/2/3 and
// FSDP (1 and 2) with their gathers, prefetch and reduce-scatters
// (sharding.go, gather.go, grad_reduce.go, shard_*.go, fsdp*.go; what FSDP1's wrap
// leaves in the cache before the step, fsdp1_wrap.go), offload of optimizer
// state, parameters and activations, paged optimizers, and embedding
// tables whose rows, sparse gradients and row-wise optimizer state change
// from step to step (table*.go, RunSteps), and a dropless MoE layer's
// routed rows, which parallel(expert_spread=) sizes anew for each
// micro-batch copy, layer and step (routing.go). Which allocations go to which
// CUDA stream, and so to which of the allocator's pools, is streams.go
// (async TP's backend stream and its symmetric memory: async_tp.go;
// blocks ProcessGroupNCCL's record_stream holds before torch 2.8:
// nccl_record.go);
// what nvidia-smi then shows, row by row, device.go. Training on one GPU,
// under a Megatron layout or FSDP2, the steady step follows a first step whose
// optimizer makes its state at its end, through the same allocator
// (lazy_states.go); under Megatron that first step follows the job's
// start too (the model's parameter tensors moved into DDP's buffer, one
// fp32 main shard per parameter: shard_megatron.go).
//
// A repeated block is replayed op by op, as every other: no block's
// replay stands in for the next ones', because the allocator's state at
// a block's end is not the state at its start moved by what the block
// keeps. In BenchmarkEvaluateLlama70B3D's first stage (20 layers, 4
// micro-batches in flight) the free blocks at each layer's end differ
// from the layer before's in number as well as place: in the first
// step's forward their count falls by up to nine a layer while the
// cache its setup left lasts, then rises by up to two a layer as each
// layer makes three or four segments; in the steady forward it falls by
// two to ten a layer, in the backward it rises by two to four. A best
// fit reads the whole free list of its pool, and of blocks of one size
// takes the first in list order, which the removals' swaps of the
// list's last block into the hole make depend on every free block, so
// no layer's choices follow from the one before's without replaying
// them.
//
// The replay's bookkeeping of its own state carries //go:norace, as
// sim/alloc does (its doc.go): allocating and releasing a tensor
// (allocateParts, release), the peaks and timeline (sample,
// recordPeakCache), the table of live tensors (tensors) and each value's
// holders and tensor (freeValue, maybeFree, finished, unhold). They read
// and write only what newReplayState makes for one Replay (its
// allocator, live tensors, per-value slices and the Report it fills,
// which the caller reads only once RunBelow returns): nothing there is
// reachable from another goroutine while the replay runs, and nothing in
// them starts or meets one, so the race detector has no race to find
// there. Its checks were a seventh of a race build's instructions on the
// FuzzSizes inputs of 65,536 blocks past the device's limit (a million
// allocations). Every function that reads the program or the plan, which
// pipeline stages and the search share between goroutines, stays
// instrumented.
package replay
