package timing

import (
	"math"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// The communication part of the time model: how long each collective of
// comm.go's inventory takes on the links of the plan's cluster, and which
// part of it the step waits for.
//
// Links. Inside a node GPUs talk over NVLink (Device.LinkGBps per
// direction, or Cluster.IntraGBps); across nodes over one NIC per GPU
// (Cluster.InterGBps, or the typical fabric of the GPU's generation, see
// InterNodeGBps). NCCL reaches a measured fraction of the line rate
// (calibration.md D2):
//
//   - NVLink4/5 with NVSwitch (H100/H200/B200 SXM): ring busBW ~370 of
//     450 GB/s per direction, 0.82 (sjeaugey, NVIDIA/nccl-tests#212);
//   - NVLink3 (A100 SXM): all_reduce busBW 200-208 of 300 GB/s, 0.68
//     (NVIDIA/nccl-tests#149, #178);
//   - an NVLink bridge between two PCIe cards: ~116 of 300 GB/s, 0.39
//     (NVIDIA/nccl#1161);
//   - the network: 12.2 GB/s on a 100 Gb/s (12.5 GB/s) NIC, "as good as
//     you can get" (sjeaugey, NVIDIA/nccl-tests#29), 96 of 100 GB/s on
//     4 x HDR (NVIDIA/nccl-tests#119): 0.96;
//   - PCIe between cards without NVLink: no measurement in calibration.md;
//     0.75 of the PCIe line rate is an assumption.
//
// Algorithms (nccl-tests doc/PERFORMANCE.md): a ring all-reduce moves
// 2(n-1)/n of the message per rank, all-gather and reduce-scatter (n-1)/n,
// all-to-all (n-1)/n, send/recv the message once. busFactor (comm.go)
// holds these factors. A ring that leaves the node goes through every
// member's NIC at once: with k members of the group on each node, NCCL's
// channels spread the crossing traffic over those k NICs (sjeaugey in
// nccl-tests#29: a DGX-1 reaches 48 GB/s through 4 NICs where one gives
// 12.2), so the ring runs at min(NVLink, k x NIC) bus bandwidth. Groups
// are laid out in Megatron's rank order (tp fastest, then cp, dp, pp), as
// commGroups does.

// Link efficiencies (see above).
const (
	nvlinkSwitchEff = 0.82
	nvlink3Eff      = 0.68
	nvlinkBridgeEff = 0.39
	networkEff      = 0.96
	pcieP2PEff      = 0.75
)

// intraLink is the NVLink (or PCIe) bandwidth between two GPUs of a node,
// per direction, as NCCL uses it: nominal GB/s times efficiency.
func intraLink(p *core.Plan) (gbps, eff float64) {
	d := p.Device
	nominal := d.LinkGBps
	if p.Cluster.IntraGBps > 0 {
		nominal = p.Cluster.IntraGBps
	}
	name := strings.ToUpper(d.Name)
	switch {
	case nominal <= 0:
		return d.PCIeGBps, pcieP2PEff
	case strings.Contains(name, "PCIE") || strings.Contains(name, "NVL") && d.LinkGBps < 400:
		return nominal, nvlinkBridgeEff
	case nominal >= 400:
		return nominal, nvlinkSwitchEff
	}
	return nominal, nvlink3Eff
}

// InterNodeGBps is the network bandwidth per GPU and direction when the
// cluster does not give it: one NIC per GPU of the GPU's generation.
// Hopper and later: 400 Gb/s (50 GB/s; DGX H100's eight ConnectX-7, the
// Llama 3 clusters of calibration.md D2). A100: 200 Gb/s HDR (25 GB/s;
// DGX A100/Selene, Azure NDm A100 v4 in calibration.md D2). Others: an
// assumed 100 Gb/s.
func InterNodeGBps(d hw.Device) float64 {
	n := strings.ToUpper(d.Name)
	switch {
	case strings.HasPrefix(n, "H1"), strings.HasPrefix(n, "H2"), strings.HasPrefix(n, "B"), strings.HasPrefix(n, "GB"), strings.HasPrefix(n, "MI3"):
		return 50
	case strings.HasPrefix(n, "A100"):
		return 25
	}
	return 12.5
}

// interLink is the network bandwidth per GPU and direction, with NCCL's
// efficiency.
func interLink(p *core.Plan) (gbps, eff float64) {
	if p.Cluster.InterGBps > 0 {
		return p.Cluster.InterGBps, networkEff
	}
	return InterNodeGBps(p.Device), networkEff
}

// groupLayout is where a communicator's ranks sit: size ranks, perNode of
// them on each node.
type groupLayout struct {
	size, perNode int64
}

// layout places the named group (tp, cp, dp, ep, edp, pp) in Megatron's
// rank order: tp fastest, then cp, then dp, then pp. The experts have a
// grid of their own over the same ranks (parallel_state.py at
// core_v0.12.0: RankGenerator(tp=expert tp, ep, dp=expert dp, pp, cp=1)):
// expert tp fastest, then ep, then the expert-data-parallel group, so
// with expert tp 1 the ep ranks are consecutive.
func groupLayoutOf(p *core.Plan, group string) groupLayout {
	par := p.Parallel.Norm()
	gpn := p.Cluster.Norm(par.GPUs()).GPUsPerNode
	size, stride := replay.GroupSize(p, group), int64(1)
	switch group {
	case "tp":
	case "cp":
		stride = par.TP
	case "ep":
		stride = expertTP(par)
	case "edp":
		stride = expertTP(par) * par.EP
	case "pp":
		stride = par.TP * par.CP * par.DP
	case "dp_replicate": // HSDP: across the shard groups
		stride = par.TP * par.ShardDegree()
	default: // dp: the data-parallel and context-parallel ranks together
		stride = par.TP
	}
	per := int64(1)
	if stride < gpn {
		per = max(gpn/stride, 1)
	}
	return groupLayout{size: size, perNode: min(per, size)}
}

// expertTP is the experts' tensor-parallel degree: ETP, or tp when unset.
func expertTP(par core.Parallelism) int64 {
	if par.ETP > 0 {
		return par.ETP
	}
	return par.TP
}

// links is what a plan's collectives run over: the bus bandwidth inside
// a node and per GPU across nodes (bytes/s), and whether the GPUs of a
// node talk over NVLink.
type links struct {
	intra, inter float64
	nvlink       bool
}

func linksOf(p *core.Plan) links {
	ig, ie := intraLink(p)
	xg, xe := interLink(p)
	return links{intra: ig * ie * 1e9, inter: xg * xe * 1e9, nvlink: ie != pcieP2PEff}
}

// commCtx times the collectives of one plan, its links and group layouts
// worked out once.
type commCtx struct {
	p       *core.Plan
	l       links
	names   [8]string
	layouts [8]groupLayout
	n       int
}

func newCommCtx(p *core.Plan) *commCtx { return &commCtx{p: p, l: linksOf(p)} }

// layout is the named group's layout.
func (c *commCtx) layout(group string) groupLayout {
	for i := 0; i < c.n; i++ {
		if c.names[i] == group {
			return c.layouts[i]
		}
	}
	g := groupLayoutOf(c.p, group)
	if c.n < len(c.names) {
		c.names[c.n], c.layouts[c.n] = group, g
		c.n++
	}
	return g
}

// seconds is collectiveSeconds over the context's links and layouts.
func (c *commCtx) seconds(kind, group string, bytes int64) float64 {
	return collectiveTime(c.l, c.layout(group), kind, bytes)
}

// exposed is the time c's collectives leave exposed, before the
// recompute's factor: each one's time beyond the GEMM it runs beside
// (Hide, tp_overlap.go), times their count.
func (c *commCtx) exposed(s CommSum) float64 {
	return max(0, c.seconds(s.Kind, s.Group, s.Bytes)-s.Hide) * s.N
}

// TPExposed is what the tensor-parallel collectives of comm leave
// exposed in plan p's group (GpuWork.Times' tp_comm row before its
// recompute factor), the forward's and the backward's apart: Times
// counts the forward's 1 + recompute/forward times, and the backward's
// not at all in evaluation. Search bounds a step time from below with it.
func TPExposed(p *core.Plan, comm []CommSum) (fwd, bwd float64) {
	cc := newCommCtx(p)
	for _, c := range comm {
		if c.Group != "tp" {
			continue
		}
		if c.Backward {
			bwd += cc.exposed(c)
		} else {
			fwd += cc.exposed(c)
		}
	}
	return fwd, bwd
}

// collectiveSeconds is the time of one collective of bytes (the message
// as comm.go records it: the full tensor reduced, gathered or scattered)
// in the named group: NCCL's latency and protocol model (nccl.go) over
// the bus bandwidth of the group's links.
func collectiveSeconds(p *core.Plan, kind, group string, bytes int64) float64 {
	return collectiveTime(linksOf(p), groupLayoutOf(p, group), kind, bytes)
}

// collectiveTime is collectiveSeconds in a group of layout g.
func collectiveTime(l links, g groupLayout, kind string, bytes int64) float64 {
	if g.size <= 1 || bytes <= 0 {
		return 0
	}
	intra, inter, nvlink := l.intra, l.inter, l.nvlink
	b := float64(bytes)
	crosses := g.perNode < g.size
	switch kind {
	case "send_recv":
		if crosses {
			return p2pLatency(true, nvlink) + b/inter
		}
		return p2pLatency(false, nvlink) + b/intra
	case "all_to_all":
		n := float64(g.size)
		if !crosses {
			return p2pLatency(false, nvlink) + b*(n-1)/n/intra
		}
		k := float64(g.perNode)
		return p2pLatency(true, nvlink) + math.Max(b*(k-1)/n/intra, b*(n-k)/n/inter)
	}
	bw := intra
	if crosses {
		bw = math.Min(intra, float64(g.perNode)*inter)
	}
	nodes := math.Ceil(float64(g.size) / float64(g.perNode))
	return ncclSeconds(ncclGroup{ranks: float64(g.size), nodes: nodes, busBW: bw, nvlink: nvlink}, kind, b)
}

// Bucket sizes of the data-parallel gradient reduction: the last bucket
// reduced cannot overlap the backward.
const (
	// torch DistributedDataParallel(bucket_cap_mb=25).
	ddpLastBucket = replay.DdpBucketCap
	// Megatron-LM DistributedDataParallel: bucket_size defaults to
	// max(40,000,000, 1,000,000 x dp) elements
	// (megatron/core/distributed/distributed_data_parallel.py).
	megatronBucketElems = 40_000_000
)

// commExposure is the communication the step waits for: per micro-batch
// and once per step.
type commExposure struct {
	perMB      [5]replay.TimeShare // tp, cp, ep, pp and fsdp (arrays: a step prices without allocating)
	tail       [1]replay.TimeShare // dp
	gradCopy   float64             // ZeRO-Offload's gradient copies to the host left exposed (overlap_comm), seconds
	fsdpCopies float64             // FSDP's CPU offload copies left exposed, seconds per step
	nvmeReads  float64             // ZeRO-Infinity's parameter reads from NVMe left exposed, seconds per step
}

// exposedComm applies the overlap rules:
//
//   - tensor-parallel and expert-parallel (all-to-all) collectives sit
//     between the matmuls that need their results: exposed, except the
//     backward's that Megatron-Core runs beside a column-parallel
//     linear's other GEMM (tp_overlap.go), exposed by what outlasts
//     that GEMM. A recomputed
//     forward runs its collectives again, in proportion to the recomputed
//     share of the forward.
//   - context parallelism's ring exchange of K/V runs behind the attention
//     kernels (Megatron's ring attention overlaps each P2P step with the
//     previous block's attention): exposed where it outlasts them.
//     Ulysses' all-to-alls (cp_mode="ulysses") sit between the
//     projections and the kernel: exposed.
//   - pipeline send/recv: exposed (p2pSeconds). In the steady state each micro-batch
//     waits for its activation (forward) and its gradient (backward);
//     sending and receiving run at once on separate directions of the link.
//   - ZeRO-3 / FSDP parameter gathers and gradient reduce-scatters run per
//     micro-batch on a side stream, prefetched ahead of the compute that
//     needs them: exposed where they outlast the forward (gathers) or the
//     backward (re-gathers and reduce-scatters). FSDP1 under no_sync()
//     reduce-scatters at the synchronising micro-batch only, behind its
//     backward alone.
//   - DDP and Megatron gradient reduction is bucketed and overlaps the
//     backward of the last micro-batch (gradient accumulation reduces once
//     per step); the last bucket cannot overlap. Megatron's distributed
//     optimizer gathers the updated parameters behind the next forward.
//     (PyTorch DDP overlaps by default; Megatron needs
//     --overlap-grad-reduce --overlap-param-gather, which its published
//     large-scale recipes and Llama 3 set. Without them,
//     parallel(overlap_grad_reduce=False, overlap_param_gather=False),
//     the reduction runs whole after the backward and the gather after
//     the optimizer step: exposed.)
//   - DeepSpeed ZeRO-1/2: overlap_comm defaults to stage == 3
//     (deepspeed/runtime/zero/config.py, validator overlap_comm_valid), so
//     at stages 1 and 2 the gradient reduction and the all-gather of the
//     updated partitions are exposed. With parallel(overlap_comm=True)
//     reduce_ipg_grads reduces each bucket of reduce_bucket_size elements
//     on the reduction stream as the backward fills it, and with
//     ZeRO-Offload copies its fp32 gradients to the host on the same
//     stream (stage_1_and_2.py at edaa722): like DDP, the stream's work
//     is exposed where it outlasts the backward, and the last bucket's at
//     least; the gather after the step stays exposed.
func (w *GpuWork) exposedComm(plan *core.Plan) commExposure {
	var out commExposure
	cc := newCommCtx(plan)
	mb := w.Mb
	rf := 0.0
	if mb.Forward > 0 {
		rf = mb.Recompute / mb.Forward
	}
	var tp, ep, cp, cpA2A float64
	var ppBytes int64
	for _, c := range w.MbComm {
		if w.Eval && c.Backward {
			continue
		}
		t := cc.exposed(c) // tp_overlap.go
		if !c.Backward {
			t *= 1 + rf
		}
		switch c.Group {
		case "tp":
			tp += t
		case "ep":
			ep += t
		case "cp":
			if c.Kind == "all_to_all" {
				cpA2A += t // Ulysses
			} else {
				cp += t
			}
		case "pp":
			ppBytes = max(ppBytes, c.Bytes)
		}
	}
	pp := float64(max(w.PpSend, w.PpRecv)) * cc.p2pSeconds(ppBytes)
	if !w.Eval {
		pp *= 2
	}
	out.perMB[0] = replay.TimeShare{Name: "tp_comm", Seconds: tp}
	out.perMB[1] = replay.TimeShare{Name: "cp_comm", Seconds: max(0, cp-w.Attn) + cpA2A}
	out.perMB[2] = replay.TimeShare{Name: "ep_comm", Seconds: ep}
	out.perMB[3] = replay.TimeShare{Name: "pp_comm", Seconds: pp}

	bwdWindow := mb.Backward + mb.Recompute
	// FSDP1 under no_sync() and FSDP2 with fsdp_no_sync reduce-scatter at
	// the synchronising micro-batch only (replay.FSDPNoSync): its
	// reduce-scatters (rsSync, seconds per step) and offloaded gradient
	// copies sit behind that micro-batch's backward alone.
	syncOnce := w.Mode == replay.DistFSDP && replay.FSDPNoSync(plan)
	var gatherMB, rsMB, rsSync, grad, params float64
	var gradBytes, paramBytes int64
	var gradKind, gradGroup, paramKind, paramGroup string
	for _, c := range w.DpComm {
		t := cc.seconds(c.Kind, c.Group, c.Bytes)
		perStep := float64(max(plan.GradAccum, 1))
		switch {
		case w.Mode == replay.DistFSDP || (w.Mode == replay.DistZeRO && w.Zero == 3):
			switch {
			case c.Kind == "all_gather":
				gatherMB += t / perStep
			case syncOnce:
				rsSync += t
			default:
				rsMB += t / perStep
			}
		case c.Backward:
			grad += t
			gradBytes += c.Bytes
			gradKind, gradGroup = c.Kind, c.Group
		default:
			params += t
			paramBytes += c.Bytes
			paramKind, paramGroup = c.Kind, c.Group
		}
	}
	// FSDP's CPU offload copies each unit's shards to the GPU before its
	// all-gather and each gradient shard to the host after its
	// reduce-scatter, on side streams (FSDP1's pre-unshard and
	// post-backward streams, FSDP2's all-gather copy-in and
	// reduce-scatter streams) in the chain of its collectives: they
	// overlap the compute as the collectives do, and are exposed where
	// the chain outlasts it. Their exposed part is the offload's. The
	// copies down split between the forward's gathers and the
	// backward's (eval: the forward's only); FSDP1's copies up under
	// no_sync, made at the synchronising micro-batch only, sit beside
	// its backward with its reduce-scatters. fsdp_comm is the average
	// micro-batch's exposure (paid m times).
	// Of those, the gathers at a pass's edge (FSDP's root unit, with DPO's
	// reference copy; ZeRO-3's embedding and head) and the last
	// reduce-scatter (FSDP's root's, ZeRO-3's last bucket) have nothing to
	// overlap (replay.ShardEdges): they are exposed whole, the rest where
	// it outlasts the compute. The edge gathers are taken whole out of the
	// split; the other gathers go half beside each pass.
	m := float64(max(w.M, 1))
	down := w.fsdpDown / m
	root, ref, last := w.edgeSeconds(cc)
	exposedFSDP := func(rs, down, up float64) float64 {
		g := root + ref
		if w.Eval { // one pass: every gather beside the forward
			return g + max(0, max(0, gatherMB-g)+down-mb.Forward)
		}
		split := (max(0, gatherMB-g) + down) / 2
		e := min(last, rs)
		return g + max(0, split-mb.Forward) + e + max(0, split+rs+up-e-bwdWindow)
	}
	average := func(down, up float64) float64 { // the m micro-batches' mean exposure
		if !syncOnce {
			return exposedFSDP(rsMB, down, up/m)
		}
		return ((m-1)*exposedFSDP(rsMB, down, 0) + exposedFSDP(rsMB+rsSync, down, up)) / m
	}
	// ZeRO-Infinity's parameter reads from NVMe come first in that chain
	// (nvme.go): their exposed part, beyond the copies', is nvme.
	reads := w.nvmeParamRead / m
	var fsdp float64
	if gatherMB > 0 || rsMB > 0 || rsSync > 0 || down > 0 || w.fsdpUp > 0 || reads > 0 {
		fsdp = average(0, 0)
		copies := average(down, w.fsdpUp)
		out.fsdpCopies = m * (copies - fsdp)
		out.nvmeReads = m * (average(down+reads, w.fsdpUp) - copies)
	}
	out.perMB[4] = replay.TimeShare{Name: "fsdp_comm", Seconds: fsdp}
	var dp float64
	switch w.Mode {
	case replay.DistDDP, replay.DistMegatron:
		gb, pb := int64(ddpLastBucket), int64(ddpLastBucket)
		if w.Mode == replay.DistMegatron {
			n := max(megatronBucketElems, 1_000_000*plan.Parallel.Norm().DP)
			gb, pb = plan.Precision.Grads.Bytes(n), plan.Precision.Params.Bytes(n)
		}
		megatron := w.Mode == replay.DistMegatron
		switch {
		case grad > 0 && megatron && plan.Parallel.NoOverlapGradReduce:
			dp += grad
		case grad > 0:
			last := cc.seconds(gradKind, gradGroup, min(gb, gradBytes))
			dp += max(last, grad-bwdWindow)
		}
		switch {
		case params > 0 && megatron && plan.Parallel.NoOverlapParamGather:
			dp += params
		case params > 0:
			last := cc.seconds(paramKind, paramGroup, min(pb, paramBytes))
			dp += max(last, params-mb.Forward)
		}
	case replay.DistZeRO:
		// BF16_Optimizer all-reduces after the backward, overlap_comm or
		// not: no hook reduces during it (replay/zero_accum.go)
		if !plan.Parallel.OverlapComm || w.Zero > 2 || plan.ZeroBF16Optimizer() {
			dp = grad + params
			break
		}
		reduce, copies := w.zeroReductionStream(plan, cc, grad, gradBytes, gradKind, gradGroup, bwdWindow)
		dp = reduce + params
		out.gradCopy = copies // the copies' share: in offload
	default:
		dp = grad + params
	}
	out.tail[0] = replay.TimeShare{Name: "dp_comm", Seconds: dp}
	return out
}

// zeroReductionStream is what DeepSpeed ZeRO-1/2's reduction stream
// exposes over one step with overlap_comm, split into the reduction's
// share and ZeRO-Offload's copies' share (SetZeROOffloadCopies). The
// stream's work of each micro-step runs behind that micro-step's
// backward (window, with its recompute), all but its last bucket's
// reduction and copies: the epilogue reduces the last bucket after the
// backward and synchronizes (independent_gradient_partition_epilogue,
// stage_1_and_2.py 919-933 at edaa722), and stage 2 runs it at every
// micro-step ("ZeRO stage >= 2 communicates during non gradient
// accumulation boundaries as well", runtime/engine.py
// allreduce_gradients, 2902-2904), so grad, stage 2's reductions of the
// step, splits evenly over them; stage 1 reduces at the boundary only
// (reduce_ready_partitions_and_remove_grads, 1767-1769). The
// accumulation copies follow replay.AccumulateCopiesAt, the fp32 copies
// the boundary.
func (w *GpuWork) zeroReductionStream(plan *core.Plan, cc *commCtx, grad float64, gradBytes int64, kind, group string, window float64) (reduce, copies float64) {
	g := replay.ZeROMicroSteps(plan)
	bucket := plan.Precision.Params.Bytes(plan.ZeroSizes().ReduceBucket)
	// Micro-steps 1 to g - 2 are alike: the first, one of them (counted
	// g - 2 times) and the last stand for all.
	type microSteps struct{ k, times int64 }
	classes := append(make([]microSteps, 0, 3), microSteps{0, 1})
	if g > 2 {
		classes = append(classes, microSteps{1, g - 2})
	}
	if g > 1 {
		classes = append(classes, microSteps{g - 1, 1})
	}
	for _, ms := range classes {
		red, bytes := 0.0, int64(0)
		switch {
		case w.Zero == 2:
			red, bytes = grad/float64(g), gradBytes/g
		case ms.k == g-1:
			red, bytes = grad, gradBytes
		}
		acc := float64(replay.AccumulateCopiesAt(w.Zero, ms.k, g))
		work := red + acc*w.accCopy
		lastCopies := acc * w.accCopyLast
		if ms.k == g-1 {
			work += w.gradCopy
			lastCopies += w.gradCopyLast
		}
		if work <= 0 {
			continue
		}
		var lastReduce float64
		if bytes > 0 { // a part of the micro-step's reduction (of one bucket: all of it, less the latency of a separate collective)
			lastReduce = min(red, cc.seconds(kind, group, min(bucket, bytes)))
		}
		exposed := max(lastReduce+lastCopies, work-window)
		r := min(exposed, max(lastReduce, red-window))
		reduce += float64(ms.times) * r
		copies += float64(ms.times) * (exposed - r)
	}
	return reduce, copies
}

// hostSeconds is the time of host transfers the step waits for: host
// placed tables (their PCIe round trip and the host's scattered row
// accesses, replay/table_host.go) and offload traffic (PCIe at the rate
// a copy to or from pinned host memory reaches on the GPU's link,
// hw.KernelRates.PCIe; no simulated offload uses NVMe), not overlapped
// with compute
// (torchtune's activation copies are, where workOf has the replay's
// timeline: offload.go replaces their share).
//
// anemoi's processor offload runs torch's save_on_cpu(pin_memory=True)
// (OffloadWrapper, torch/distributed/algorithms/_checkpoint/
// checkpoint_wrapper.py): each saved tensor is copied into a fresh pinned
// tensor by copy_ without non_blocking, so the forward waits for every
// copy on its own stream, and the backward's unpack copies it back with
// .to(device, non_blocking=True) on the backward's stream before the op
// that needs it. Neither overlaps compute.
func hostSeconds(r *replay.Replay) float64 {
	var t float64
	var tablePCIe int64
	for _, ts := range r.Rep.Tables {
		tablePCIe += ts.PCIeEachWay
		if ts.Placement == "host" {
			t += ts.Transfer.PCIeSeconds + ts.Transfer.Host.Seconds
		}
	}
	d := r.Plan.Device
	if off := r.Rep.Traffic.PCIe - tablePCIe; off > 0 && d.PCIeGBps > 0 {
		t += PCIeSeconds(d, off)
	}
	return t
}

// PCIeSeconds is the time of bytes copied to or from pinned host memory
// over the GPU's link (hw.KernelRates.PCIe of its PCIeGBps); 0 for a
// device without a link figure.
func PCIeSeconds(d hw.Device, bytes int64) float64 {
	if d.PCIeGBps <= 0 {
		return 0
	}
	return float64(bytes) / (d.PCIeGBps * d.Rates().PCIe * 1e9)
}

// p2pSeconds is the time to pass one activation (or its gradient) of
// bytes to the next pipeline stage. Without sequence parallelism every
// tensor-parallel rank holds the whole activation; Megatron's
// scatter/gather optimization (Narayanan et al. 2021, section 4.1;
// --scatter-gather-tensors-in-pipeline, on by default) sends 1/tp of it
// from each rank, over each rank's own NIC, and rebuilds it with an
// all-gather over NVLink. With sequence parallelism the activation is
// already split over the tensor-parallel ranks.
func (c *commCtx) p2pSeconds(bytes int64) float64 {
	par := c.p.Parallel.Norm()
	if par.TP > 1 && !par.SequenceParallel {
		part := (bytes + par.TP - 1) / par.TP
		return c.seconds("send_recv", "pp", part) + c.seconds("all_gather", "tp", bytes)
	}
	return c.seconds("send_recv", "pp", bytes)
}
