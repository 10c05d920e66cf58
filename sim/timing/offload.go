package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// Activation offload's time: torchtune's OffloadActivations
// (torchtune/training/_activation_offloading.py, use_streams=True, the
// recipes' default; read at 1814feb17, the release of the README ladder,
// and at bd2a0fc7, the newest: the same logic) copies on a side stream
// s1, so its PCIe time hides behind the compute stream s0's work except
// where a dependency makes s0 wait. The replay's offload timeline
// (replay.OffloadTimeline) is simulated with three clocks, the CPU
// issuing kernels (each op's dispatch time, dispatch.go), s0 running
// them (each op's GPU time) and s1 running the copies (bytes at the
// pinned-copy rate of the GPU's link, hw.KernelRates.PCIe), with the
// dependencies the source sets:
//
//   - forward, pack_tensor: s1.wait_stream(s0), so a copy starts once s0
//     has run every kernel issued before it (the tensor is produced and
//     its saving op ran); the GPU tensor is kept in fwd_stash and, when
//     the tensor max_fwd_stash_size (5) packs later is packed,
//     s0.wait_event(its copy's event): s0 waits for copy k before the
//     work issued after copy k+5. memsh counts the offloaded tensors
//     only; torchtune also counts the packs of parameters and tensors
//     under min_offload_size, so its wait comes sooner (fewer tensors in
//     between) than here.
//   - backward, unpack_tensor_with_streams: each tensor is copied back on
//     s1 when the autograd node that needs it runs (the CPU reaches it),
//     then s0.wait_stream(s1): the node's kernels (with a checkpointed
//     region's recompute) wait for the copy. The node's post-hook makes
//     s1 wait for s0's event recorded after the previous unpacking node
//     (prev_node_ids: the stream may not reuse that memory before s0 is
//     done with it), so copy k+1 starts only once s0 has run node k-1:
//     the copy of the next layer's input overlaps the current layer's
//     work, one layer ahead, as far as the CPU has issued it. The first
//     unpacking node also waits for the forward's copies still in
//     fwd_stash.
//
// Every offloaded tensor is copied back (memsh's replay frees each GPU
// tensor once its forward use ends; torchtune reuses the last stash
// entries in the backward without a copy: a few of the last tensors
// cross PCIe once, not twice, there). The exposed time is the simulated
// step with the copies less the same step without them. The CPU's lead
// is bounded by nothing here (no launch-queue limit); with
// use_streams=False torchtune copies on s0 and nothing overlaps.
//
// torchtune's README ladder (1814feb17, Llama 3.2 3B on an A100) is the
// check: adding activation offloading to the optimizer-in-backward row
// moved tokens/s 7309 -> 7301 (-0.11 %).

// fwdStash is OffloadActivations' max_fwd_stash_size default.
const fwdStash = 5

// offloadExposed is the time torchtune's activation offload adds to one
// micro-batch: the timeline simulated with its copies less without them.
// ok is false when there is no timeline to simulate (the copies are then
// timed as exposed, hostSeconds).
func offloadExposed(r *replay.Replay, costs []OpCost, streams bool) (exposed float64, ok bool) {
	outs, events := r.OffloadTimeline()
	d := r.Plan.Device
	if len(outs) == 0 || len(costs) != len(r.P.Ops) || d.PCIeGBps <= 0 {
		return 0, false
	}
	rate := d.PCIeGBps * d.Rates().PCIe * 1e9
	with := simulateOffload(costs, outs, events, rate, streams)
	without := simulateOffload(costs, nil, events, rate, streams)
	return max(0, with-without), true
}

// simulateOffload runs one micro-batch's forward and backward with the
// copies of outs and events (none when outs is nil) and returns when the
// compute stream is done.
func simulateOffload(costs []OpCost, outs []replay.CopyOut, events []replay.OffloadEvent, rate float64, streams bool) float64 {
	copies := outs != nil
	var cpu, s0, s1 float64 // when the CPU has issued, and each stream run, everything so far
	run := func(gpu, dispatch float64) {
		cpu += dispatch
		s0 = max(s0, cpu) + gpu
	}
	var ends []float64 // forward copies' ends, in issue order
	copyOut := func(bytes int64) {
		t := float64(bytes) / rate
		if !streams { // on s0, in order with the compute
			s0 = max(s0, cpu) + t
			return
		}
		if n := len(ends); n >= fwdStash {
			s0 = max(s0, ends[n-fwdStash]) // s0.wait_event: the stash entry fwdStash packs back is dropped
		}
		s1 = max(s1, s0, cpu) + t // s1.wait_stream(s0): after every kernel issued so far
		ends = append(ends, s1)
	}
	k := 0
	for k < len(outs) && outs[k].After < 0 {
		copyOut(outs[k].Bytes)
		k++
	}
	for i := range costs {
		run(costs[i].Fwd, costs[i].FwdCPU)
		for ; k < len(outs) && int(outs[k].After) == i; k++ {
			copyOut(outs[k].Bytes)
		}
	}
	// The backward: events in replay order. A node that copies something
	// back is "unpacking"; its post-hook records s0's event (evLast) and
	// makes s1 wait for the previous one's (s1Gate).
	first, unpacking := true, false
	var evLast, s1Gate float64
	for _, e := range events {
		switch e.Kind {
		case replay.EvRecompute:
			run(costs[e.Op].Fwd, costs[e.Op].FwdCPU)
		case replay.EvBackward:
			run(costs[e.Op].Bwd, costs[e.Op].BwdCPU)
			if unpacking {
				s1Gate, evLast = evLast, s0
				unpacking = false
			}
		case replay.EvCopyIn:
			if !copies {
				continue
			}
			t := float64(e.Bytes) / rate
			if !streams {
				s0 = max(s0, cpu) + t
				continue
			}
			if first { // the first unpacking node waits for the forward's stash
				s0 = max(s0, s1)
				first = false
			}
			s1 = max(s1, cpu, s1Gate) + t
			s0 = max(s0, s1) // s0.wait_stream(s1)
			unpacking = true
		}
	}
	return s0
}

// Copies from the GPU into pageable host memory run below the pinned
// rate: the driver stages them through a pinned buffer of its own and
// the CPU copies them on from there (NVIDIA's "How to Optimize Data
// Transfers in CUDA C/C++", developer.nvidia.com/blog). CUDA's
// bandwidthTest on a DGX A100 (A100-SXM4-80GB, 32 MB transfers) measured
// device-to-host 25.8 GB/s pinned and 10.8 GB/s pageable (gengwg/gpu
// nvda_gpu_benchmark.md at f1ce2499); memsh takes that ratio on every GPU
// (on a Dell A100 PCIe server the same test read 24.6 and 8.5, 0.35: the
// host decides, and this one is NVIDIA's own).
const pageableD2HFraction = 10.8 / 25.8

// PageableD2HSeconds is the time of bytes copied from the GPU into
// pageable host memory: the pinned rate (PCIeSeconds) times the measured
// pageable fraction.
func PageableD2HSeconds(d hw.Device, bytes int64) float64 {
	return PCIeSeconds(d, bytes) / pageableD2HFraction
}

// StagedCastSeconds is the CPU's cast of fp32 bytes, staged on the host
// by a blocking copy from the GPU, into a partition of the plan's
// parameter dtype: torch's blocking copy_ of a CUDA tensor into a CPU
// tensor of another dtype "performs conversions on CPU" (aten/src/ATen/
// native/cuda/Copy.cu copy_kernel_cuda at pytorch 007aa8ae), after the
// transfer into its fp32 temporary (ZeRO-3 offload_param's copy back of
// the updated partition, replay's PageableD2H). The cast reads the fp32
// values and writes the parameter dtype's, at the node's host bandwidth
// shared by its ranks, as DeepSpeedCPUAdam's own cast of the updated
// partition is priced (cpu_optimizer.go CPUOptimizerBytes).
func StagedCastSeconds(plan *core.Plan, fp32Bytes int64, ranks int64) float64 {
	if fp32Bytes <= 0 {
		return 0
	}
	n := float64(fp32Bytes) / float64(units.FP32.Bytes(1))
	bytes := float64(fp32Bytes) + n*float64(plan.Precision.Params.Bytes(1<<20))/(1<<20)
	return float64(max(ranks, 1)) * bytes / plan.Cluster.HostRate(plan.Device)
}
