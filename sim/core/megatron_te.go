package core

// Transformer Engine's GEMMs under Megatron's runtime (precision
// "megatron": Megatron-Core's TE layer spec, --transformer-impl
// transformer_engine, the default). The attention's linear_qkv and
// linear_proj and the MLP's fc1 and fc2 are TE modules
// (TELayerNormColumnParallelLinear, TERowParallelLinear: megatron/core/
// models/gpt/gpt_layer_specs.py at NVIDIA/Megatron-LM d98e8a6), whose
// GEMMs run through TE's general_gemm in any precision, bf16 included
// (transformer_engine/pytorch/cpp_extensions/gemm.py at TransformerEngine
// d0067d0: general_gemm takes get_cublas_workspace(device, ub, False), a
// torch.empty of get_cublas_workspace_size_bytes() made at the first
// call, lru_cache'd for the process: allocated through PyTorch's caching
// allocator and counted by torch.cuda.memory_allocated). The bias is
// TE's cuBLASLt epilogue on that workspace: PyTorch's own cuBLASLt
// workspace (cublas.go) is not made for them. The output layer
// (tensor_parallel.ColumnParallelLinear), the router and the attention's
// own bmm of the unfused backend stay on PyTorch's handles.
//
// Measured: Megatron-LM's functional test gpt3_mcore_te_tp1_pp1_resume_
// torch_dist_dist_optimizer (importers' TestCalibMegatronFunctional)
// holds 581,489,664 bytes allocated after its steady steps on DGX H100;
// its bf16 parameters (128,219,136), fp32 gradient buffer (256,438,272),
// distributed optimizer shard (96,164,352), PyTorch's two cuBLAS
// workspaces (67,108,864) and TE's one (33,555,456 at TE 2.10 and later;
// memsh counts 32 MiB, te_fp8.go) sum to 581,486,080.

// teGemm reports whether a Linear of role runs as a TE GEMM: under
// Megatron's runtime, the layers' projections.
func (b *Builder) teGemm(role Role) bool {
	if !b.Prec.Megatron {
		return false
	}
	switch role {
	case RoleQ, RoleK, RoleV, RoleO, RoleQKV, RoleGate, RoleUp, RoleDown, RoleLinear:
		return true
	}
	return false
}

// teGemmSeen reports whether the program has a TE GEMM (teGemm).
func (b *Builder) teGemmSeen() bool {
	for i := range b.P.Ops {
		if b.P.Ops[i].TEGemm {
			return true
		}
	}
	return false
}
