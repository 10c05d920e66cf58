package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestFSDPOffloadCopiesOverlap counts by hand what FSDP's CPU offload
// copies expose (exposedComm): they join the chain of the collectives on
// the side streams, the copies down split between the forward's and the
// backward's gathers, the copies up behind the reduce-scatters. No
// collective here (dp 2 gathers of 0 bytes are left out: gatherMB = rsMB
// = 0), a 1 s forward and a 2 s backward per micro-batch:
//
//   - 1 s down, 0.5 s up: 0.5 s beside the forward, 0.5 + 0.5 s beside
//     the backward: all hidden;
//   - 4 s down, 0 up: 2 s beside a 1 s forward (1 s out), 2 s beside a
//     2 s backward: 1 s exposed;
//   - 4 micro-batches, 8 s down and 2 s up per step: per micro-batch
//     2 s and 0.5 s: hidden;
//   - evaluation, 1.5 s down: all beside the 1 s forward: 0.5 s.
func TestFSDPOffloadCopiesOverlap(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	prec, _ := core.LookupPrecision("bf16")
	for _, row := range []struct {
		name     string
		m        int64
		eval     bool
		down, up float64
		want     float64
	}{
		{"hidden", 1, false, 1, 0.5, 0},
		{"the forward's half outlasts it", 1, false, 4, 0, 1},
		{"4 micro-batches, hidden", 4, false, 8, 2, 0},
		{"evaluation", 1, true, 1.5, 0, 0.5},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: row.m, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
			Parallel: core.Parallelism{DP: 2, FSDP: true}}
		w := &GpuWork{M: row.m, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistFSDP, Eval: row.eval, fsdpDown: row.down, fsdpUp: row.up}
		c := w.exposedComm(plan)
		if math.Abs(c.fsdpCopies-row.want) > 1e-12 {
			t.Errorf("%s: offload copies exposed %.4f s, hand count %.4f s", row.name, c.fsdpCopies, row.want)
		}
		if g := w.Times(plan); shareOf(g.Tail, "offload") != c.fsdpCopies {
			t.Errorf("%s: the offload share %.4f s, want the exposed copies %.4f s", row.name, shareOf(g.Tail, "offload"), c.fsdpCopies)
		}
	}
}

// shareOf is the seconds of the named share, 0 without one.
func shareOf(list []replay.TimeShare, name string) float64 {
	for _, s := range list {
		if s.Name == name {
			return s.Seconds
		}
	}
	return 0
}
