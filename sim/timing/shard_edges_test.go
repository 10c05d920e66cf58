package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestShardEdgesExposed counts by hand what FSDP (and ZeRO-3, by the same
// rule) leaves exposed when its root unit's collectives cannot overlap
// (replay.ShardEdges): the root's
// gather opens the forward, its reduce-scatter closes the backward, DPO's
// reference copy's gather opens its own forward; the rest of the gathers
// (half beside the forward, half beside the backward) and of the
// reduce-scatters overlap as before. One micro-batch, a 1 s forward and a
// 2 s backward, messages sized to take the seconds given on the dp
// group:
//
//   - compute-bound: 1 s of gathers (0.5 s a pass), the root's 0.2 s of
//     it; 0.5 s of reduce-scatters, the root's 0.3 s: 0.2 + 0.3 s exposed
//     (0 before the edges);
//   - bandwidth-bound: 4 s of gathers (2 s a pass) and the same root: the
//     forward's 2 s outlast it by 1 s, the root's 0.2 s inside that;
//     backward 2 + 0.5 s beside 2 s: 0.5 s; 1.5 s in all, as without the
//     edges;
//   - evaluation, 1 s of gathers (one pass, beside the forward), root
//     0.3 s: 0.3 s;
//   - DPO with a reference copy: 1.4 s of gathers, 0.4 s of them the
//     copy's, in the forward alone (0.5 + 0.4 s beside the forward), the
//     root's 0.2 s and 0.3 s as in the compute-bound case: 0.2 + 0.4 +
//     0.3 s.
func TestShardEdgesExposed(t *testing.T) {
	dev := mustDevice(t, "A100-80GB")
	prec, _ := core.LookupPrecision("bf16")
	plan := &core.Plan{Device: dev, Precision: prec, GradAccum: 1, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
		Parallel: core.Parallelism{DP: 8, FSDP: true}}
	secs := func(kind string, b int64) float64 { return collectiveSeconds(plan, kind, "dp", b) }
	for _, row := range []struct {
		name                  string
		eval                  bool
		gathers, rs           float64 // the step's, seconds
		root, rootRS, refCopy float64
		want                  func(g, rs, root, rootRS, ref float64) float64
	}{
		{"compute-bound", false, 1, 0.5, 0.2, 0.3, 0,
			func(_, _, root, rootRS, _ float64) float64 { return root + rootRS }},
		{"bandwidth-bound", false, 4, 0.5, 0.2, 0.3, 0,
			func(g, rs, _, _, _ float64) float64 { return (g/2 - 1) + (g/2 + rs - 2) }},
		{"evaluation", true, 1, 0, 0.3, 0, 0,
			func(_, _, root, _, _ float64) float64 { return root }},
		{"DPO reference copy", false, 1.4, 0.5, 0.2, 0.3, 0.4,
			func(_, _, root, rootRS, ref float64) float64 { return root + ref + rootRS }},
	} {
		gb, rb := bytesFor(plan, "all_gather", row.gathers), bytesFor(plan, "reduce_scatter", row.rs)
		e := replay.ShardEdges{RootGather: bytesFor(plan, "all_gather", row.root), RootScatter: bytesFor(plan, "reduce_scatter", row.rootRS),
			RefGather: bytesFor(plan, "all_gather", row.refCopy)}
		w := &GpuWork{M: 1, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistFSDP, Eval: row.eval, ShardEdges: e,
			DpComm: []core.CommRecord{{Kind: "all_gather", Group: "dp", Bytes: gb}}}
		if rb > 0 {
			w.DpComm = append(w.DpComm, core.CommRecord{Kind: "reduce_scatter", Group: "dp", Bytes: rb, Backward: true})
		}
		want := row.want(secs("all_gather", gb), secs("reduce_scatter", rb), secs("all_gather", e.RootGather),
			secs("reduce_scatter", e.RootScatter), secs("all_gather", e.RefGather))
		c := w.exposedComm(plan)
		if got := shareOf(c.perMB[:], "fsdp_comm"); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: fsdp_comm %.6f s, hand count %.6f s", row.name, got, want)
		}
	}
}

// bytesFor is the message size a collective of kind takes secs to move on
// plan's dp group (0 for 0 s).
func bytesFor(plan *core.Plan, kind string, secs float64) int64 {
	if secs <= 0 {
		return 0
	}
	bytes := int64(0)
	for lo, hi := int64(1), int64(1)<<50; lo <= hi; {
		mid := (lo + hi) / 2
		if collectiveSeconds(plan, kind, "dp", mid) < secs {
			lo, bytes = mid+1, mid+1
		} else {
			hi = mid - 1
		}
	}
	return bytes
}
