package nn

import "github.com/memsh/memsh/sim/core"

// The host side of Megatron-Core's router and alltoall token dispatcher.
//
// A Megatron-Core MoE layer's router (TopKRouter.forward: the gating GEMM,
// the score function, top-k, the aux loss and its tracker) and dispatcher
// (dispatch_preprocess with its device-to-host copies of the split sizes,
// token_dispatch, dispatch_postprocess, combine_preprocess, token_combine,
// combine_postprocess) are many small ops: their kernels take
// microseconds on the GPU, their dispatch on the host far longer. memsh
// prices such a group at the host's measured time per aten op
// (timing/host_ops.go, 12.4 µs on the H200's host), in place of its
// kernels' launches, from the number of aten ops it dispatches, as it does
// for transformers' per-expert loop (moe_loop.go).
//
// The counts: torch.profiler on a CPU run of Megatron-Core's own code
// (tools/oracle/megatron_moe_host.py, torch 2.6; two expert-parallel ranks
// over gloo; sim/testdata/megatron_moe_host.jsonl), the experts and the
// test's loss left out. The runs here set --moe-permute-fusion except
// ms-swift's Qwen3-30B-A3B (core_r0.11.0), so the counts are those of the
// fused path with Transformer Engine's fused permute, unpermute and chunk
// sort left out (they are Triton kernels launched from Python: a few aten
// ops and launches each, not counted): a lower bound. The unfused path
// splits the received rows into tp x ep x local-expert chunks and
// concatenates them back, a few view ops a chunk (core_r0.11.0 at 128
// experts, 64 a rank: 1,321 forward and 1,665 backward aten ops, the one
// unfused run recorded); parallel(permute_fusion=False) replays the
// unfused path's host syncs (moe_megatron_sync.go) and memsh prices the
// fused count for it, that run's count being at another chunk count than
// the Qwen3-30B-A3B row's (sim/calib_swift_moe_syncs_test.go).
// The router's gating GEMM runs Transformer Engine's general_gemm on CUDA
// where the CPU run takes torch.mm over fp32 copies (a few aten ops more
// here).
//
// Forward, the sync (megatronDispatchSyncs, moe_megatron_sync.go) splits
// the layer: the router and dispatch_preprocess run before the host
// waits, the rest after it.
// The counts by router (moe_route.go) and release, aten ops before the
// sync, after it, and in the backward:
//
//	                                        core_v0.13.0    core_v0.12.0
//	softmax, then top-k (Qwen1.5-MoE)       197 / 19 / 92   186 / 13 / 89
//	top-k renormalised (Qwen3-MoE)          206 / 19 / 100  194 / 13 / 100
//	sigmoid, expert bias, seq aux loss      252 / 19 / 127  247 / 13 / 123
//	(DeepSeek-V3, Moonlight)
//
// core_v0.12.0's token_permutation syncs inside one call; its counts put
// the whole permutation before the sync. parallel(unpermute_probs=True)
// (the releases before 0.13) takes the core_v0.12.0 column, core_r0.11.0's
// too: its fused path is not recorded (sim/testdata/megatron_moe_host.jsonl
// holds its unfused run only), so for it the column is a stand-in.
type megatronHostOps struct{ pre, post, bwd int32 }

func (m *MoE) megatronHost(b *core.Builder) megatronHostOps {
	return megatronHostCounts(m.router(), m.NormTopK, b.Par.UnpermuteProbs)
}

// megatronHostCounts is the table above: by router, whether the top-k
// weights are renormalised, and whether the release is 0.12 or older.
func megatronHostCounts(router string, norm, old bool) megatronHostOps {
	switch {
	case router == RouterSigmoid && old:
		return megatronHostOps{247, 13, 123}
	case router == RouterSigmoid:
		return megatronHostOps{252, 19, 127}
	case norm && old:
		return megatronHostOps{194, 13, 100}
	case norm:
		return megatronHostOps{206, 19, 100}
	case old:
		return megatronHostOps{186, 13, 89}
	}
	return megatronHostOps{197, 19, 92}
}

// markMegatronHost sets the host counts on the layer's router and
// dispatcher ops: ops [first, sync] (the router through the permute that
// syncs) dispatch pre aten ops forward and the backward's bwd, on their
// first op; last (the unpermute) the post ones. The group's other ops
// launch nothing of their own (core.OpInfo.HostGrouped).
func (m *MoE) markMegatronHost(b *core.Builder, first, sync, last int32) {
	h := m.megatronHost(b)
	b.Op(first).AtenF, b.Op(first).AtenB = h.pre, h.bwd
	for i := first + 1; i <= sync; i++ {
		b.Op(i).HostGrouped = true
	}
	b.Op(last).AtenF = h.post
}
