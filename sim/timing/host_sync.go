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
// passSyncs: transformers 5.17's eager experts 5 a pass and one a layer).
// torch.nn.utils.clip_grad_norm_ makes none on CUDA (it multiplies by the
// clamped coefficient instead of testing it, torch/nn/utils/clip_grad.py,
// _clip_grads_with_norm_), nor does the optimizer step (AdamW's step
// counts stay on the host unless capturable).
const syncLatency = 8.36e-6 + 6.56e-6

// syncClock is the two-clock replay of one phase's ops: the open
// segment's device and host time, and the closed segments' time.
type syncClock struct {
	dev, host float64 // the open segment
	done      float64 // closed segments, with their syncs' latency
	syncs     int64
}

// add runs an op's device work and host dispatch in the open segment.
func (s *syncClock) add(dev, host float64) {
	s.dev += dev
	s.host += host
}

// sync closes the open segment with n syncs: the host waits for the
// device, then each sync takes its latency.
func (s *syncClock) sync(n int32) {
	if n <= 0 {
		return
	}
	s.done += max(s.dev, s.host) + float64(n)*syncLatency
	s.dev, s.host = 0, 0
	s.syncs += int64(n)
}

// excess is what the syncs add to a phase whose device and host times
// sum to dev and host: 0 without syncs.
func (s *syncClock) excess(dev, host float64) float64 {
	if s.syncs == 0 {
		return 0
	}
	return max(0, s.done+max(s.dev, s.host)-max(dev, host))
}

// HostSyncOf is the time the host syncs of prog's forward add beyond the
// forward's max(GPU, CPU) (the two-clock replay above), plus the latency
// of those its recomputed ops make again (recomputed[i]: op i runs again
// in the backward; nil: none); syncs is their number. costs are prog's
// priced ops.
func HostSyncOf(prog *core.Program, costs []OpCost, recomputed func(i int) bool) (seconds float64, syncs int64) {
	var clk syncClock
	var dev, host, rec float64
	for i := range prog.Ops {
		c := &costs[i]
		clk.add(c.Fwd, c.FwdCPU)
		dev += c.Fwd
		host += c.FwdCPU
		n := prog.Ops[i].Syncs
		clk.sync(n)
		if n > 0 && recomputed != nil && recomputed(i) {
			rec += float64(n) * syncLatency
			syncs += int64(n)
		}
	}
	return clk.excess(dev, host) + rec, syncs + clk.syncs
}
