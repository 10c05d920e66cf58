package core

import "github.com/memsh/memsh/sim/units"

// Async TP: torch's micro-pipeline tensor parallelism, which torchtitan
// turns on with [experimental] enable_async_tensor_parallel (9dec370;
// [parallelism] in later releases;
// parallelisms/parallelize_llama.py sets torch._inductor.config.
// _micro_pipeline_tp = True and enable_symm_mem_for_group on the tp
// group; train_configs/llama3_405b.toml sets it). It is an Inductor pass
// (torch/_inductor/fx_passes/micro_pipeline_tp.py), so it acts only in
// compiled graphs: an all-gather whose result a matmul reads becomes
// symm_mem.fused_all_gather_matmul (or _scaled_matmul under float8), a
// matmul whose output is reduce-scattered fused_matmul_reduce_scatter.
// What they allocate, read in torch 2.6.0's
// torch/distributed/_symmetric_memory/__init__.py (the release cut from
// the December 2024 main the torchtitan benchmark ran, torch 1963fc8):
//
//   - the gathered input (A_flat), the matmuls' outputs and the
//     reduce-scatter's stacked partials are allocated with new_empty on
//     the current stream, the sizes DTensor's collectives allocate: the
//     caching allocator's compute pools see what they saw without it;
//   - the chunks' copies and GEMMs alternate between the current stream
//     and a backend stream (_get_backend_stream, one per priority, made
//     once), each GEMM writing into a chunk of the preallocated output
//     (mm_out_op(..., out=...)): the backend stream allocates only what a
//     GEMM takes itself, the cuBLAS workspace of each (handle, stream)
//     pair (and under float8 the cuBLASLt one of _scaled_mm), once for the
//     forward's thread and once for the autograd engine's (replay/cublas.go);
//   - the peers' shards and partials pass through a symmetric-memory
//     workspace per group (get_symm_mem_workspace: _SymmetricMemory.
//     empty_strided_p2p, mapped by the driver, not the caching allocator),
//     grown to the largest request and kept: a shard for an all-gather
//     (p2p_workspace_size_req, the shard's bytes), two output chunks for a
//     reduce-scatter (_pipelined_produce_and_all2all: out_chunks[0] x 2).
//     It is outside torch.cuda.memory_reserved, so it shows in
//     nvidia-smi (r.overheads' symm_mem_tp), not in max_memory_reserved.
//
// Not modelled: the pass's restriding of the shard and of the
// reduce-scatter's input (make_contiguous_for_perm), which Inductor
// folds into their producers; the symmetric memory's signal pad and the
// driver's granularity; the gradient's reduce-scatter in the backward,
// whose input is a sum of matmuls (q, k, v; gate and up), which the pass
// does not match (it needs a matmul producer) and so stays DTensor's.
// Timing prices the collectives as without async TP.

// validateAsyncTP checks async_tp=True against the plan: the pass works
// on DTensor's sequence-parallel collectives in compiled graphs.
func (p *Plan) validateAsyncTP() error {
	par := p.Parallel.Norm()
	if !par.AsyncTP {
		return nil
	}
	fail := func(msg, hint string) error { return &units.Error{Path: "parallel", Msg: msg, Hint: hint} }
	switch {
	case par.TP < 2:
		return fail("async_tp=True pipelines the tensor-parallel collectives: it needs tp > 1", "drop async_tp, or set tp=")
	case par.TPRuntime != "torch":
		return fail(`async_tp=True is torch's micro-pipeline TP over DTensor's collectives; Megatron's tensor parallelism (tp_runtime="megatron") has tp_comm_overlap=True instead`,
			`parallel(tp_runtime="torch", ...)`)
	case !par.SequenceParallel:
		return fail("async_tp=True fuses sequence parallelism's all-gathers and reduce-scatters with their matmuls: it needs sequence_parallel=True",
			"torchtitan's TP is always sequence-parallel")
	case !p.Compile.Blocks:
		return fail("async_tp=True is an Inductor pass (torch._inductor.config._micro_pipeline_tp): it acts only in compiled blocks",
			"train(compile=True, ...): torchtitan raises \"Async TP requires --training.compile\" (parallelize_llama.py)")
	}
	return nil
}

// noteSymmMem grows the plan's symmetric-memory workspace to n bytes
// (async TP: the largest request of a fused collective is kept).
func (b *Builder) noteSymmMem(n int64) {
	if b.Par.asyncTP {
		b.P.SymmMemWorkspace = max(b.P.SymmMemWorkspace, n)
	}
}
