package timing

import (
	"math"
)

// Collectives as NCCL runs them: NCCL's own performance model
// (NVIDIA/nccl src/graph/tuning.cc @01afd20, ncclTopoTuneModel and
// ncclTopoGetAlgoTime), with the bus bandwidth of comm.go's links. NCCL
// times every algorithm (ring, tree) and protocol (LL, LL128, Simple) as
// latency + bytes / algorithm bandwidth and runs the fastest; so does
// memsh. Small messages are latency-bound (LL: 8-byte stores carrying 4
// bytes of data and a flag, low latency, a quarter of the bandwidth);
// large ones run Simple at the link's bus bandwidth.
//
// Latency of a ring: a base latency plus one hop latency per step of the
// ring (2(n-1) steps for all-reduce, n-1 for all-gather and
// reduce-scatter), the steps between nodes at the network's hop latency.
// A tree (all-reduce across nodes): twice (ranks per node - 1 hops inside
// the node and log2(nodes) across), at 0.9 of the bus bandwidth, half of
// it as algorithm bandwidth. Constants in microseconds, as tuning.cc has
// them:
//
//	base latency         LL   LL128  Simple
//	  tree              4.4    4.4     0
//	  ring              3.6   10.0     8.4
//	hop latency
//	  NVLink  tree      .52    1.2    28      ring  .47   1.9   3.4
//	  PCIe    tree     1.0     1.9    28      ring 1.0    2.5   5.7
//	  network tree     5.0     8.5    50      ring 2.7    4.0   9.6
//
// Protocol bandwidth: LL a quarter of the bus bandwidth for all-reduce or
// across nodes (a third otherwise), LL128 0.92 of it (120 of 128 bytes),
// Simple all of it. With more than one node NCCL multiplies LL's hop
// latency inside the node by 1.8. All-to-all and send/recv are point to
// point: one Simple step at the link's hop latency.
//
// Checked against nccl-tests all_reduce_perf on eight NVLink4 GPUs in
// nccl_test.go.

// Protocols and algorithms of the model.
const (
	protoLL = iota
	protoLL128
	protoSimple
	numProtos
)

var (
	ncclBaseLat = [2][numProtos]float64{ // tree, ring
		{4.4, 4.4, 0}, {3.6, 10.0, 8.4},
	}
	ncclHopLat = [3][2][numProtos]float64{ // NVLink, PCIe, network; tree, ring
		{{.52, 1.2, 28}, {.47, 1.9, 3.4}},
		{{1.0, 1.9, 28}, {1.0, 2.5, 5.7}},
		{{5.0, 8.5, 50}, {2.7, 4.0, 9.6}},
	}
)

// Hardware rows of ncclHopLat.
const (
	hwNVLink = iota
	hwPCIe
	hwNet
)

// ring and tree index ncclBaseLat and ncclHopLat's second dimension.
const (
	algoTree = 0
	algoRing = 1
)

// ncclGroup is what NCCL's model needs of a communicator: ranks, nodes,
// the bus bandwidth of its ring (bytes/s) and whether GPUs of a node talk
// over NVLink.
type ncclGroup struct {
	ranks, nodes float64
	busBW        float64
	nvlink       bool
}

// ncclSeconds is NCCL's time for a ring collective (all_reduce,
// all_gather, reduce_scatter) of bytes, the fastest algorithm and
// protocol.
func ncclSeconds(g ncclGroup, kind string, bytes float64) float64 {
	if g.ranks <= 1 || bytes <= 0 || g.busBW <= 0 {
		return 0
	}
	nsteps, interSteps := g.ranks-1, g.nodes-1
	if kind == "all_reduce" {
		nsteps, interSteps = 2*(g.ranks-1), 2*(g.nodes-1)
	}
	intraHW := hwPCIe
	if g.nvlink {
		intraHW = hwNVLink
	}
	best := math.Inf(1)
	for p := 0; p < numProtos; p++ {
		bw := g.busBW
		switch p {
		case protoLL:
			if g.nodes > 1 || kind == "all_reduce" {
				bw /= 4
			} else {
				bw /= 3
			}
		case protoLL128:
			bw *= 0.92
		}
		intraLat := ncclHopLat[intraHW][algoRing][p]
		if g.nodes > 1 && p == protoLL {
			intraLat *= 1.8
		}
		lat := ncclBaseLat[algoRing][p] + (nsteps-interSteps)*intraLat + interSteps*ncclHopLat[hwNet][algoRing][p]
		algBW := bw * g.ranks / nsteps
		best = math.Min(best, lat*1e-6+bytes/algBW)
		if kind == "all_reduce" && g.nodes > 1 {
			tIntra := ncclHopLat[intraHW][algoTree][p]
			if p == protoLL {
				tIntra *= 1.8
			}
			tlat := ncclBaseLat[algoTree][p] + 2*((g.ranks/g.nodes-1)*tIntra+math.Log2(g.nodes)*ncclHopLat[hwNet][algoTree][p])
			tbw := 0.9 * g.busBW
			switch p {
			case protoLL:
				tbw /= 3.8
			case protoLL128:
				tbw *= 0.915
			}
			best = math.Min(best, tlat*1e-6+bytes/(0.5*tbw))
		}
	}
	return best
}

// p2pLatency is the latency of a point-to-point exchange (send/recv, each
// peer of an all-to-all): one Simple step over the link.
func p2pLatency(crossesNodes, nvlink bool) float64 {
	hw := hwPCIe
	switch {
	case crossesNodes:
		hw = hwNet
	case nvlink:
		hw = hwNVLink
	}
	return (ncclBaseLat[algoRing][protoSimple] + ncclHopLat[hw][algoRing][protoSimple]) * 1e-6
}
