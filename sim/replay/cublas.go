package replay

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// cuBLAS's workspaces (aten/src/ATen/cuda/CublasHandlePool.cpp): each
// time an op takes the current cuBLAS handle, PyTorch sets the handle's
// workspace for the current stream (setWorkspaceForHandle), allocated
// through the caching allocator the first time a (handle, stream) pair
// is seen and kept for the process (cublas_handle_stream_to_workspace).
// Handles belong to threads (DeviceThreadHandlePool's thread-local pool
// window): the forward runs on the Python thread, while the autograd
// engine runs a CUDA device's backward on a worker thread of its own
// (torch/csrc/autograd/engine.cpp, one per device), which reserves a
// second handle. Every matmul runs on the compute stream, so a training
// step holds two workspaces and an evaluation one; the recompute of a
// checkpointed region runs on the backward's thread. Their size is
// core.RuntimeMemory.CublasWorkspace.

// cublasWorkspaces allocates the forward thread's workspace and, in the
// steady state of training, the backward thread's (both made by the
// first step and kept). A first step replayed before the steady one
// (Replay.lazy, lazy_states.go) makes both here too: a process that ran
// anything before (another case, an evaluation) holds them from its
// first step's start (measured on one H200, sim/testdata/cuda_h200,
// tools/oracle/cuda_run2.sh: in hf.jsonl every case after the first
// starts step 1 with 64 MiB more allocated than the same model's first
// case, the two 32 MiB workspaces; suite.jsonl's embedding case, whose
// backward runs no matmul, holds both).
func (r *Replay) cublasWorkspaces() {
	if r.Plan.Runtime.CPU {
		return
	}
	r.op = "cublas"
	r.cublasWorkspace("the forward's thread")
	if r.Plan.Phase != core.Eval && (!r.Plan.FirstStep || r.lazy) {
		r.cublasWorkspace("the autograd engine's backward thread")
		r.backwardBlas = true
	}
	r.cublasLtWorkspaces()
	r.asyncTPWorkspaces() // async_tp.go
}

// cublasLtWorkspaces allocates cuBLASLt's workspaces (core/cublas.go):
// the forward's thread's when an op of the step runs on cuBLASLt (a
// Linear with a bias, a float8 linear), the backward thread's when one
// runs on it in the backward: _scaled_mm, or a biased Linear that a
// checkpoint recomputes (the recompute runs on the autograd engine's
// thread, whose handle takes a cuBLASLt workspace of its own: measured on
// one H200, sim/testdata/cuda_h200, tools/oracle/cuda_run.sh: the
// process holds a second 1 MiB workspace from the first case that
// recomputes GPT-2's biased Linears, gpt2 ckpt=full, on). Each is made at
// the first such call of the run and kept; the replay makes them with the
// cuBLAS ones.
func (r *Replay) cublasLtWorkspaces() {
	b := r.Plan.RuntimeMemory.CublasLtWorkspace(r.Plan.Device)
	if b <= 0 {
		return
	}
	fwd, bwd := false, false
	for i := range r.P.Ops {
		op := &r.P.Ops[i]
		if r.P.CublasLt(op) {
			fwd = true
			recomputed := !r.savesOnItsOwn(op) && !r.keeps(op)
			bwd = bwd || ((op.ScaledMM || recomputed) && r.Plan.Phase != core.Eval)
		}
	}
	for _, t := range []struct {
		on     bool
		thread string
	}{{fwd, "the forward's thread"}, {bwd, "the autograd engine's backward thread"}} {
		if t.on {
			r.allocate(Alloc{Tensor: "cuBLASLt workspace", DType: units.INT8, Bytes: b,
				Why: "cuBLASLt workspace of " + t.thread + " (a Linear's bias epilogue, torch._scaled_mm; allocated through the caching allocator, kept for the process)", Cat: core.CatTemporaries})
		}
	}
}

// backwardCublas allocates the backward thread's workspace at the first
// backward op that runs a matmul (its own, or its region's recompute)
// in the run's first step.
func (r *Replay) backwardCublas(op *core.OpInfo) {
	if r.backwardBlas || r.Plan.Runtime.CPU || (op.Kind != "matmul" && op.Region == 0) {
		return
	}
	r.cublasWorkspace("the autograd engine's backward thread")
	r.backwardBlas = true
}

// sideStreamCublas allocates, at the first matmul a side stream runs on a
// thread (0: the forward's, 1: the autograd engine's backward, which runs
// the recompute too), that (handle, stream) pair's workspace, on the side
// stream (the current one) and kept: PyTorch keys workspaces by handle and
// stream (CublasHandlePool.cpp, cublas_handle_stream_to_workspace).
func (r *Replay) sideStreamCublas(op *core.OpInfo, thread int) {
	if r.sideBlas[thread] || r.Plan.Runtime.CPU || op.Kind != "matmul" {
		return
	}
	r.sideBlas[thread] = true
	r.cublasWorkspace([2]string{"the forward's thread", "the autograd engine's backward thread"}[thread] + " on the shared expert's stream")
}

func (r *Replay) cublasWorkspace(thread string) {
	b := r.Plan.RuntimeMemory.CublasWorkspace(r.Plan.Device)
	id := r.allocate(Alloc{Tensor: "cuBLAS workspace", DType: units.INT8, Bytes: b,
		Why: "cuBLAS workspace of " + thread + " (allocated through the caching allocator, kept for the process)", Cat: core.CatTemporaries})
	if r.lazy && r.phase != PhaseSetup { // a first step's, made in its step and kept (lazy_states.go)
		r.lazyIDs = append(r.lazyIDs, id)
	}
}
