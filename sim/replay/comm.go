package replay

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// Communication: NCCL's buffers (device memory outside PyTorch's
// allocator) and the bytes each collective moves per step.

// NCCL's per-connection FIFO buffers (src/init.cc): Simple NCCL_BUFFSIZE
// 4 MiB (DEFAULT_BUFFSIZE), LL128 120*640*8*8 = 4,915,200 B
// (DEFAULT_LL128_BUFFSIZE), LL 8*512*8*16 = 512 KiB (DEFAULT_LL_BUFFSIZE).
const (
	ncclSimple = 4 << 20
	ncclLL128  = 4_915_200
	ncclLL     = 512 << 10
	ncclFIFO   = ncclSimple + ncclLL128 + ncclLL
	// All-to-all connects every peer on every channel; NCCL's ALLOC log for
	// 8 x H100 shows 10 MiB + 2 MiB per channel and peer (NVIDIA/nccl#1685,
	// +3.28 GB on each GPU after the first all_to_all_single).
	ncclPeerChannel = 10<<20 + 2<<20
	// Send/recv (pipeline) uses the shared p2p buffers: the Simple FIFO on
	// a few channels per peer (NCCL_NCHANNELS_PER_NET_PEER, p2p channels).
	ncclP2PChannels = 8
)

// ncclChannels estimates the channels NCCL opens on a communicator: 32
// (MAXCHANNELS) on NVLink4/5 nodes (Hopper, Blackwell), 16 on older NVLink,
// 4 over PCIe, 16 across nodes (2 per NIC on 8-NIC nodes). The memory is
// linear in the channels (sjeaugey in NVIDIA/nccl#864 and #986, where one
// communicator used ~1.6 GB on 8 GPUs).
func ncclChannels(d hw.Device, intra bool) int64 {
	switch {
	case !intra:
		return 16
	case d.LinkGBps >= 400:
		return 32
	case d.LinkGBps > 0:
		return 16
	}
	return 4
}

// commGroup is one communicator of this GPU.
type commGroup struct {
	name    string
	size    int64
	intra   bool   // within one node
	pattern string // ring | p2p | alltoall
}

// commGroups lists the communicators a rank uses per step, with Megatron's
// rank order (tp fastest, then cp, dp, pp): a group is inside a node when
// its stride times its size fits the node.
func commGroups(p *core.Plan) []commGroup {
	par := p.Parallel.Norm()
	cl := p.Cluster.Norm(par.GPUs())
	gpn := cl.GPUsPerNode
	var gs []commGroup
	add := func(name string, size, stride int64, pattern string) {
		if size > 1 {
			gs = append(gs, commGroup{name: name, size: size, intra: size*stride <= gpn, pattern: pattern})
		}
	}
	add("tp", par.TP, 1, "ring")
	cpPattern := "p2p" // ring attention's K/V exchange
	if par.CPMode == "ulysses" {
		cpPattern = "alltoall"
	}
	add("cp", par.CP, par.TP, cpPattern)
	// The data-parallel group of the sharding modes holds the
	// context-parallel ranks too (dp x cp, less HSDP's replicas).
	add("dp", par.ShardDegree(), par.TP, "ring")
	add("dp_replicate", par.DPReplicate, par.TP*par.ShardDegree(), "ring")
	add("ep", par.EP, par.TP*par.CP, "alltoall")
	add("pp", par.PP, par.TP*par.CP*par.DP, "p2p")
	return gs
}

// commOverheads are the NCCL buffers per communicator, outside PyTorch's
// allocator. They are estimates: NCCL sizes them from the topology it
// detects, the algorithms it connects and NCCL_BUFFSIZE.
func CommOverheads(p *core.Plan) []Overhead {
	if !p.Parallel.Active() {
		return nil
	}
	var out []Overhead
	for _, g := range commGroups(p) {
		ch := ncclChannels(p.Device, g.intra)
		var b int64
		var how string
		switch g.pattern {
		case "ring":
			// One ring connection per channel (ring: 2 connections, the
			// receive side holds the FIFO); a tree across nodes doubles it.
			conns := int64(1)
			if !g.intra {
				conns = 2
			}
			b = ch * conns * ncclFIFO
			how = fmt.Sprintf("%d channels x %d connection(s) x (Simple 4 MiB + LL128 4.69 MiB + LL 0.5 MiB)", ch, conns)
		case "alltoall":
			b = (g.size - 1) * ch * ncclPeerChannel
			how = fmt.Sprintf("%d peers x %d channels x 12 MiB (NVIDIA/nccl#1685)", g.size-1, ch)
		default:
			peers := min(g.size-1, 2)
			b = peers * ncclP2PChannels * ncclSimple
			how = fmt.Sprintf("%d peer(s) x %d p2p channels x 4 MiB", peers, ncclP2PChannels)
		}
		where := "inside a node"
		if !g.intra {
			where = "across nodes"
		}
		out = append(out, Overhead{Name: "nccl_" + g.name, Bytes: b,
			Source: fmt.Sprintf("NCCL buffers of the %s communicator (%d ranks, %s): %s; an estimate (src/init.cc buffer sizes, NCCL_BUFFSIZE)", g.name, g.size, where, how)})
	}
	return out
}

// groupSize is the number of ranks in a named group.
func GroupSize(p *core.Plan, name string) int64 {
	par := p.Parallel.Norm()
	switch name {
	case "tp":
		return par.TP
	case "cp":
		return par.CP
	case "pp":
		return par.PP
	case "ep":
		return par.EP
	case "edp":
		return par.ExpertShardDegree()
	case "dp_replicate":
		return par.DPReplicate
	}
	return par.ShardDegree() // dp: data-parallel and context-parallel ranks
}

// commPerStep is every collective of one step: the lowering's records
// times the micro-batches, plus the data-parallel gradient and parameter
// traffic of the sharding mode.
func (d *distState) CommPerStep() []core.CommRecord {
	plan := d.plan
	prec := plan.Precision
	m := max(plan.GradAccum, 1)
	copies := int64(1)
	if st := plan.PipeStage; st != nil {
		m = plan.MicroBatches() * d.Par.VirtualStages
		copies = int64(len(st.Chunks))
	}
	var out []core.CommRecord
	for _, c := range d.p.Comm {
		c.Bytes = c.Bytes * m / copies
		out = append(out, c)
	}
	if plan.Phase == core.Eval && d.Mode != DistZeRO && d.Mode != DistFSDP {
		return out
	}
	perMB := max(plan.GradAccum, 1)
	for _, g := range d.groups(true) {
		group := "dp"
		if g.name == "expert" {
			group = "edp"
		}
		if g.n <= 1 {
			continue
		}
		grads, params := prec.Grads.Bytes(g.numel), prec.Params.Bytes(g.numel)
		switch d.Mode {
		case DistDDP:
			out = append(out, core.CommRecord{Kind: "all_reduce", Group: group, Bytes: grads, Backward: true})
		case DistMegatron:
			if d.Par.DistributedOptimizer {
				out = append(out, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads, Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			} else {
				out = append(out, core.CommRecord{Kind: "all_reduce", Group: group, Bytes: grads, Backward: true})
			}
		case DistZeRO:
			switch d.Par.Zero {
			case 1:
				out = append(out, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads, Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			case 2:
				out = append(out, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads * perMB, Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			case 3:
				gathered := d.gatherDT.Bytes(g.numel)
				out = append(out, core.CommRecord{Kind: "all_gather", Group: group, Bytes: 2 * gathered * perMB, Backward: false}, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads * perMB, Backward: true})
			}
		case DistFSDP:
			gathered, reduced := d.gatherDT.Bytes(g.numel), d.reduceDT.Bytes(g.numel)
			gathers := int64(2) // forward and backward
			if d.Par.NoReshard {
				gathers = 1 // the forward's gather serves the backward
			}
			if d.pipeHold { // once per step: gathered through all micro-batches
				gathers, perMB = 1, 1
			}
			out = append(out, core.CommRecord{Kind: "all_gather", Group: group, Bytes: gathers * gathered * perMB, Backward: false}, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: reduced * perMB, Backward: true})
			if r := d.Par.DPReplicate; r > 1 { // HSDP: the sharded gradient all-reduced over the replicas
				out = append(out, core.CommRecord{Kind: "all_reduce", Group: "dp_replicate", Bytes: reduced / g.n * perMB, Backward: true})
			}
		}
	}
	return append(out, d.quantComm()...)
}

// quantComm is the all-gather of sharded quantized weights per step
// (they are frozen: no gradient to reduce).
func (d *distState) quantComm() []core.CommRecord {
	if d.Mode != DistFSDP && (d.Mode != DistZeRO || d.Par.Zero != 3) {
		return nil
	}
	var b int64
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.Quant == "" || p.TiedTo >= 0 {
			continue
		}
		if d.Mode == DistFSDP && !d.fsdp1 {
			b += d.quantGathered(int32(pi), d.Degree(int32(pi)))
		} else {
			b += d.quantStorageDT().Bytes(d.quantCodes(int32(pi)))
		}
	}
	if b == 0 {
		return nil
	}
	gathers, perMB := int64(2), max(d.plan.GradAccum, 1)
	switch {
	case d.pipeHold:
		gathers, perMB = 1, 1
	case d.Par.NoReshard:
		gathers = 1
	}
	return []core.CommRecord{{Kind: "all_gather", Group: "dp", Bytes: gathers * b * perMB}}
}

// busFactor is the fraction of a message each rank sends over the links
// in NCCL's ring algorithms (nccl-tests PERFORMANCE.md: all-reduce
// 2(n-1)/n, all-gather and reduce-scatter (n-1)/n).
func BusFactor(kind string, n int64) float64 {
	if n <= 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch kind {
	case "all_reduce":
		return 2 * f
	case "send_recv":
		return 1
	}
	return f
}

// finishComm fills r.comm_bytes (by collective kind) and the network
// traffic of the step.
func (d *distState) finishComm(rep *Report) {
	if d == nil {
		return
	}
	by := map[string]int64{}
	var net float64
	for _, c := range d.CommPerStep() {
		by[c.Kind] += c.Bytes
		net += float64(c.Bytes) * BusFactor(c.Kind, GroupSize(d.plan, c.Group))
	}
	kinds := make([]string, 0, len(by))
	for k := range by {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		rep.CommBytes = append(rep.CommBytes, Share{Name: k, Bytes: by[k]})
	}
	rep.Traffic.Network += int64(net)
	for _, g := range commGroups(d.plan) {
		if g.name == "tp" && !g.intra {
			rep.Notes = append(rep.Notes, fmt.Sprintf("tp=%d spans nodes: tensor parallelism's per-layer collectives cross the network (keep tp within a node)", g.size))
		}
	}
	// Trainable parameters of the whole model, not of this rank: every
	// rank of an expert-parallel group holds experts/ep of each MoE.
	if ep := d.Par.EP; ep > 1 {
		rep.TrainableParams = 0
		for _, p := range d.p.Params {
			if p.Trainable && p.TiedTo < 0 && !p.StageCopy {
				n := p.FullNumel
				if IsExpertRole(p.Role) {
					n *= ep
				}
				rep.TrainableParams += n
			}
		}
	}
}
