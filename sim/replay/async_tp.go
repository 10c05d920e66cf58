package replay

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Async TP (parallel(async_tp=True), core/async_tp.go): torch's
// micro-pipeline TP issues every other chunk's copy and GEMM on a backend
// stream (torch/distributed/_symmetric_memory/__init__.py at torch 2.6.0:
// _get_backend_stream, used by _pipelined_multi_all_gather_and_consume and
// _pipelined_produce_and_all2all), each GEMM writing into a chunk of an
// output the compute stream allocated. cuBLAS keys its workspaces by
// (handle, stream) (CublasHandlePool.cpp), so the backend stream takes one
// per thread that runs a fused op there: the forward's, and in training the
// autograd engine's (the backward's fused all-gather of a row-parallel
// linear's output gradient, and the recompute of checkpointed blocks). A
// float8 linear's GEMM is torch._scaled_mm, which runs on cuBLASLt and
// takes its workspace too. They come from the backend stream's pools,
// which never serve the compute stream: reserved memory grows by them
// (r.breakdown's async_tp_stream) and, as allocations, the peak allocated.
// The symmetric-memory workspace is outside the allocator: a row of
// r.overheads (SymmMemOverheads).

// asyncTPWorkspaces allocates the backend stream's workspaces with the
// compute stream's (cublasWorkspaces).
func (r *Replay) asyncTPWorkspaces() {
	if !r.Plan.Parallel.Norm().AsyncTP || r.Plan.Parallel.Norm().TP < 2 || r.Plan.Runtime.CPU {
		return
	}
	prev := r.stream
	r.stream = StreamAsyncTP
	defer func() { r.stream = prev }()
	train := r.Plan.Phase != core.Eval
	r.cublasWorkspace("the forward's thread on async TP's backend stream")
	if train {
		r.cublasWorkspace("the autograd engine's backward thread on async TP's backend stream")
	}
	b := r.Plan.RuntimeMemory.CublasLtWorkspace(r.Plan.Device)
	if b <= 0 || !r.scaledMM() {
		return
	}
	threads := []string{"the forward's thread"}
	if train {
		threads = append(threads, "the autograd engine's backward thread")
	}
	for _, t := range threads {
		id := r.allocate(Alloc{Tensor: "cuBLASLt workspace", DType: units.INT8, Bytes: b,
			Why: "cuBLASLt workspace of " + t + " on async TP's backend stream (torch._scaled_mm of a float8 linear; allocated through the caching allocator, kept for the process)", Cat: core.CatTemporaries})
		if r.lazy && r.phase != PhaseSetup {
			r.lazyIDs = append(r.lazyIDs, id)
		}
	}
}

// scaledMM reports whether an op of the step runs torch._scaled_mm.
func (r *Replay) scaledMM() bool {
	for i := range r.P.Ops {
		if r.P.Ops[i].ScaledMM {
			return true
		}
	}
	return false
}

// SymmMemOverheads is async TP's symmetric-memory workspace, outside the
// caching allocator (core.Program.SymmMemWorkspace): none without it.
func SymmMemOverheads(prog *core.Program) []Overhead {
	if prog == nil || prog.SymmMemWorkspace <= 0 {
		return nil
	}
	return []Overhead{{Name: "symm_mem_tp", Bytes: prog.SymmMemWorkspace,
		text: "async TP's symmetric-memory workspace of the tp group, the largest request of its fused collectives: two output chunks of a reduce-scatter, or an all-gather's shard " +
			"(torch/distributed/_symmetric_memory/__init__.py at torch 2.6.0: get_symm_mem_workspace, mapped by the driver outside the caching allocator; its signal pad and the driver's granularity not counted)"}}
}
