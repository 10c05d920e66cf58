package timing

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// TestExpertGroupLayout places the expert-parallel and expert-data-
// parallel groups as Megatron's expert grid does (parallel_state.py at
// core_v0.12.0: expert tp fastest, then ep, then expert dp), by hand:
//
//	16 GPUs on 2 nodes, tp 2, dp 8, ep 8, etp 1: ep = ranks 0..7 (one
//	  node), edp = {r, r+8} (2 ranks, one a node)
//	8 GPUs on 1 node, tp 2, dp 4, ep 4, etp 1: ep = 0..3, edp = {r, r+4}
//	  (both inside the node)
//	16 GPUs on 2 nodes, tp 2, dp 8, ep 8, etp = tp 2: ep = 0, 2, .., 14
//	  (4 a node), edp of 16 / (2 x 8) = 1 rank
func TestExpertGroupLayout(t *testing.T) {
	for _, row := range []struct {
		name    string
		nodes   int64
		par     core.Parallelism
		ep, edp groupLayout
	}{
		{"Qwen3-30B-A3B's", 2, core.Parallelism{TP: 2, DP: 8, EP: 8, ETP: 1}, groupLayout{8, 8}, groupLayout{2, 1}},
		{"Qwen1.5-MoE's tp 2", 1, core.Parallelism{TP: 2, DP: 4, EP: 4, ETP: 1}, groupLayout{4, 4}, groupLayout{2, 2}},
		{"expert tp = tp", 2, core.Parallelism{TP: 2, DP: 8, EP: 8}, groupLayout{8, 4}, groupLayout{1, 1}},
	} {
		p := &core.Plan{Parallel: row.par, Cluster: hw.Cluster{Nodes: row.nodes, GPUsPerNode: 8}}
		if g := groupLayoutOf(p, "ep"); g != row.ep {
			t.Errorf("%s ep: %+v, want %+v", row.name, g, row.ep)
		}
		if g := groupLayoutOf(p, "edp"); g != row.edp {
			t.Errorf("%s edp: %+v, want %+v", row.name, g, row.edp)
		}
	}
}
