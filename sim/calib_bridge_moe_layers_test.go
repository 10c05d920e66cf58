package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestMegatronBridgeQwen3EPDegrees replays the other Qwen3-30B-A3B rows
// of the same Megatron-Bridge notes (NVIDIA-NeMo/Megatron-Bridge
// da871ee81, "Record parallelism and recompute perf notes",
// docs/parallelisms.md, "By Model Size"): 16 H100,
// BF16, the alltoall dispatcher, EP overlap on, CUDA graphs off, global
// batch 1024, micro-batch 1. "TP=1, PP=1, EP=16 and TP=1, PP=1, EP=8 both
// ran near 31 s/step after warmup. The EP=8 row used about 7 GB more peak
// memory, while TP=2, PP=1, EP=16 roughly doubled steady step time."
//
// Memory, held back: memsh's EP=8 row holds 7.25 GB more than its EP=16
// row (62.67 -> 69.92 GB max allocated: twice the local experts, their
// gradients and fp32 main shards over an expert-data-parallel group of
// 2), against "about 7 GB". Asserted within 1 GB (the figure is given
// to the gigabyte).
//
// Time, not asserted, a diagnosis of the EP=16 row's gap as it stood
// before the host was priced (calib_bridge_moe_test.go: 33.76 s at
// a83e405 against 42.21 with EP overlap off; 39.62 s now, below).
// memsh has no EP overlap (--overlap-moe-expert-parallel-comm), so its
// step without it bounds its own step with it from above. At EP=8 the
// all-to-all stays inside the node (4.1 s of exposed ep_comm over NVLink,
// against 17.5 s over the network at EP=16), and memsh's step was 20.37
// s against a measured 31: 34 % fast before any overlap is granted, so most
// of the EP=16 row's gap is not the network all-to-all. The measured
// steps follow the count of layer micro-batches, not the work: 31 s over
// 64 micro-batches x 48 layers is 10.1 ms a layer micro-batch at EP=16
// and at EP=8; TP=2 runs 128 micro-batches of half the tokens per rank
// (sequence parallel) and "roughly doubled" (about 60 s: 9.8 ms). memsh's
// GPU work per layer micro-batch was 5.2 ms at TP=1 (forward 1.72,
// backward 3.49; 5.47 ms since a766c2a priced the vocabulary-parallel
// loss at its kernels' passes) and scales with the tokens. A cost per layer and
// micro-batch that does not shrink with the tokens is what the CPU side
// pays: Megatron-Core's eager dispatch of each MoE layer (the router, the
// dispatcher's preprocess with its host sync before the all-to-all,
// token_dispatcher.py _maybe_dtoh_and_synchronize, Transformer Engine's
// GroupedLinear, whose CPU overhead grows with the local experts:
// NVIDIA/TransformerEngine#1499, torch.split and 2 x num_gemms
// torch.empty calls per call). The same notes' tuned run of the preset
// (HybridEP, EP overlap, TE CUDA graphs over moe_router and
// moe_preprocess, which removes their launches and the sync) averaged
// 20.15 s (docs/training/moe-optimization.md): 6.6 ms a layer
// micro-batch. memsh priced 10 µs of CPU per forward kernel and 6 µs per
// backward one (timing/dispatch.go), which kept the CPU behind the GPU
// here. The router and the dispatcher are now priced by the aten ops
// they dispatch (nn/moe_megatron_host.go: counted on a CPU run of
// Megatron-Core, at memsh's 12.4 µs an aten op), which makes the forward
// host-bound: EP=16 33.80 -> 39.62 s and EP=8 20.42 -> 26.24 s without
// EP overlap (40.24 and 26.86 s with the vocabulary-parallel loss at its
// kernels' passes, a766c2a), against near 31 s measured with it (the
// EP=16 row's 17.5 s of exposed all-to-all is what the overlap hides).
// Nothing is fitted to these rows; TP=2, EP=16 is not replayed (memsh
// asks ep to divide dp; Megatron's expert grid, tp x dp = 16 ranks split
// as ep 16, does not).
//
// The EP=8 step, held back: memsh's step without EP overlap bounds its
// own step with it from above, so it should not be below the measured 31
// s; it is 15.5 % below (26.21 s). That gap is kept from widening (16 %,
// the gap rounded up, as the held-back rows of TestMegatronSwiftCalibration);
// a step above 31 s is not a miss, as the overlap is not modelled. It was
// 13.4 % (26.86 s, band 14 %) until the loss ran as the recipe runs it:
// scripts/performance/utils/overrides.py _set_common_perf_overrides sets
// cross_entropy_fusion_impl = "te" (l.69 at 0dae7282; the fusion is on by
// GPTModelProvider's default), Transformer Engine's parallel_cross_entropy
// (loss_parallel="te", core/fused_ce.go): two passes over the bf16 logits
// and one in the backward, no fp32 copy, where Megatron's eager loss made
// 52 bytes of passes a logit (0.65 s of the step at 64 micro-batches;
// EP=16 40.24 -> 39.59 s; max allocated 62.7 -> 60.2 GB). The rest of the
// gap is the layers' (GPU work 5.26 ms a layer micro-batch against 10.1
// measured, above).
func TestMegatronBridgeQwen3EPDegrees(t *testing.T) {
	const gbs, measuredStep, measuredExtraGB = 1024, 31.0, 7.0
	run := func(ep int64) *replay.Report {
		m, prec, h100, rt := bridgeQwen3(t)
		ck, _ := core.ParseCheckpoint("none")
		const dp = 16
		p := &core.Plan{Model: m, Batch: 1, Seq: 4096, GradAccum: gbs / dp, Members: 1, Precision: prec, Runtime: rt,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: h100, Phase: core.Train,
			Parallel: core.Parallelism{DP: dp, EP: ep, ETP: 1, DistributedOptimizer: true, MicroBatches: gbs / dp, LossParallel: core.TEParallelCE},
			Cluster:  hw.Cluster{Nodes: 2, GPUsPerNode: 8}}
		p.Overheads.Dispatch = "fused"
		return evalPlan(t, p)
	}
	r16, r8 := run(16), run(8)
	layerMBs := float64(gbs/16) * 48
	for _, row := range []struct {
		ep int64
		r  *replay.Report
	}{{16, r16}, {8, r8}} {
		var gpu, ep float64
		for _, s := range row.r.Time.Breakdown {
			switch s.Name {
			case "forward", "backward", "recompute":
				gpu += s.Seconds
			case "ep_comm":
				ep = s.Seconds
			}
		}
		t.Logf("EP=%d: %.1f GB max allocated; %.2f s without EP overlap (measured near %.0f s with it, %+.0f %%), ep_comm %.2f s; a layer micro-batch: GPU work %.2f ms, measured %.1f ms",
			row.ep, float64(row.r.PeakAllocated)/1e9, row.r.Time.StepSeconds, measuredStep, 100*(row.r.Time.StepSeconds/measuredStep-1),
			ep, 1e3*gpu/layerMBs, 1e3*measuredStep/layerMBs)
	}
	extra := float64(r8.PeakAllocated-r16.PeakAllocated) / 1e9
	t.Logf("EP=8 holds %.2f GB more than EP=16 (measured about %.0f GB)", extra, measuredExtraGB)
	if math.Abs(extra-measuredExtraGB) > 1 {
		t.Errorf("EP=8 over EP=16: %.2f GB more max allocated, measured about %.0f GB (goal within 1 GB)", extra, measuredExtraGB)
	}
	const ep8Gap = 0.16 // the EP=8 step's held-back gap below the measured step with overlap (above)
	if d := r8.Time.StepSeconds/measuredStep - 1; d < -ep8Gap {
		t.Errorf("EP=8: %.2f s without EP overlap, measured near %.0f s with it (%+.1f %%): the held-back gap widened past -%.0f %%",
			r8.Time.StepSeconds, measuredStep, 100*d, 100*ep8Gap)
	}
	t.Logf("  step held back: memsh has no EP overlap, so only EP=8's gap below the measured step (-%.0f %%) is asserted (see above)", 100*ep8Gap)
}
