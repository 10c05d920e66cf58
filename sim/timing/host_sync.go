package timing

import "github.com/memsh/memsh/sim/core"

// Host syncs: the host waiting for the device.
//
// PyTorch launches kernels asynchronously, so without a sync a phase
// takes the larger of its kernels' GPU time and its CPU dispatch time
// (dispatch.go). An op that reads a device value on the host
// (core.OpInfo.Syncs: a tensor's truth value or .item(), nonzero's
// count in torch.where, a 0-dim CUDA tensor used as an index) makes the
// host wait there until the device has run everything launched before
// it, and the device then idles until the host launches the next
// kernel. A phase with syncs is therefore replayed on two clocks: its ops
// in order, split into segments at the syncs, each segment taking the
// larger of its own GPU and CPU time, and each sync its latency. What
// that adds beyond the phase's max(GPU, CPU) is the breakdown's
// host_sync term (its own row of r.modules): the overlap the syncs take
// away, and their latency.
//
// syncLatency is one sync on an idle device: the host's time in
// cudaMemcpyAsync (8.36 µs a call: 15.28 ms over 1,828 calls) plus
// cudaStreamSynchronize (6.56 µs: 8.39 ms over 1,279 calls), measured on
// one H200 (sim/testdata/cuda_h200/hf_profile.jsonl, the qwen3_moe_loop
// case's step 4 under torch.profiler, whose syncs find the device idle:
// 0.15 s of kernels in a 0.70 s step; tools/oracle/cuda_hf.py --profile).
// A sync in recomputed forward work (a checkpointed region rerun in the
// backward) is charged its latency only: where the backward's kernels
// stand when it comes is not replayed, so that is a lower bound.
//
// Where memsh places syncs: the per-expert MoE loops (nn/moe_loop.go,
// passSyncs: transformers 5.17's eager experts 5 a pass and one a layer),
// Megatron-Core's alltoall dispatcher (nn/moe_megatron_sync.go: one a
// layer, three without permute fusion, none with drop-and-pad).
// torch.nn.utils.clip_grad_norm_ makes none on CUDA (it multiplies by the
// clamped coefficient instead of testing it, torch/nn/utils/clip_grad.py,
// _clip_grads_with_norm_), nor does the optimizer step (AdamW's step
// counts stay on the host unless capturable).
const syncLatency = 8.36e-6 + 6.56e-6

// syncClock is the two-clock replay of one phase's ops, streamed: the
// open segment's device and host time, the closed segments' time and the
// syncs. Segments also end where the ops' repeated block changes
// (core.OpInfo.Block): each block is replayed apart, so the phase's
// figures are sums over blocks, as the search's block profiles add them
// up (sim/search, search_profile.go); only a program with syncs reads
// them.
type syncClock struct {
	dev, host float64 // the open segment
	done      float64 // closed segments, with their syncs' latency
	syncs     int64
	block     int32 // the open segment's block
}

// op runs an op of block block, its device work and host dispatch, then
// its n syncs, which close the segment: the host waits for the device,
// then each sync takes its latency.
func (s *syncClock) op(block int32, dev, host float64, n int32) {
	if block != s.block {
		s.flush()
		s.block = block
	}
	s.dev += dev
	s.host += host
	if n > 0 {
		s.done += max(s.dev, s.host) + float64(n)*syncLatency
		s.dev, s.host = 0, 0
		s.syncs += int64(n)
	}
}

// flush closes the open segment without a sync.
func (s *syncClock) flush() {
	s.done += max(s.dev, s.host)
	s.dev, s.host = 0, 0
}

// HostSync is what the syncs of t's forward add beyond its max(GPU,
// CPU), with the latency of those recomputed: 0 without syncs.
func (t ComputeTime) HostSync() float64 {
	if t.Syncs == 0 {
		return 0
	}
	return max(0, t.Synced-max(t.Forward, t.ForwardCPU)) + t.SyncRec
}

// SyncsOf adds to t the two-clock replay of prog's forward (Synced,
// Syncs) and the latency of the syncs its recomputed ops make again
// (SyncRec; recomputed(i): op i runs again in the backward, nil: none);
// costs are prog's priced ops. t's other figures are left as they are.
func SyncsOf(t *ComputeTime, prog *core.Program, costs []OpCost, recomputed func(i int) bool) {
	var clk syncClock
	for i := range prog.Ops {
		op := &prog.Ops[i]
		clk.op(op.Block, costs[i].Fwd, costs[i].FwdCPU, op.Syncs)
		if op.Syncs > 0 && recomputed != nil && recomputed(i) {
			t.SyncRec += float64(op.Syncs) * syncLatency
			t.Syncs += float64(op.Syncs)
		}
	}
	clk.flush()
	t.Synced += clk.done
	t.Syncs += float64(clk.syncs)
}
