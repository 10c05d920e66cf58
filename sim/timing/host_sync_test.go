package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// The two-clock replay of a phase with host syncs, counted by hand
// (seconds in µs; L = syncLatency = 14.92 µs):
//
//   - no sync: nothing added, whatever the clocks (the phase stays
//     max(GPU, CPU) = dispatch.go's rule);
//   - host-bound, a sync after op 2: segments (dev 2+2, host 10+10) and
//     (dev 2, host 10): 20 + L + 10 against max(6, 30) = 30: L;
//   - device-bound ahead of one sync: ops (dev 50, host 10), sync, (dev
//     1, host 40): 50 + L + 40 against max(51, 50) = 51: 39 + L, the
//     overlap the sync took away and its latency;
//   - three syncs on one op: 3 L;
//   - a recomputed sync: its latency once more;
//   - a block boundary ends a segment: ops (dev 50, host 1) in block 1,
//     (dev 1, host 40, a sync) in block 2: 50 + 40 + L against
//     max(51, 41) = 51: 39 + L.
func TestHostSync(t *testing.T) {
	L := syncLatency * 1e6
	for _, tc := range []struct {
		name  string
		ops   [][4]float64 // dev µs, host µs, syncs, block
		rec   int          // index of the op recomputed (-1: none)
		want  float64      // µs
		syncs int64
	}{
		{"no sync", [][4]float64{{2, 10, 0, 0}, {50, 1, 0, 1}}, -1, 0, 0},
		{"host-bound", [][4]float64{{2, 10, 0, 0}, {2, 10, 1, 0}, {2, 10, 0, 0}}, -1, L, 1},
		{"device ahead of the sync", [][4]float64{{50, 10, 1, 0}, {1, 40, 0, 0}}, -1, 39 + L, 1},
		{"three syncs on one op", [][4]float64{{1, 10, 3, 0}, {1, 10, 0, 0}}, -1, 3 * L, 3},
		{"recomputed", [][4]float64{{1, 10, 1, 0}, {1, 10, 0, 0}}, 0, 2 * L, 2},
		{"a block boundary", [][4]float64{{50, 1, 0, 1}, {1, 40, 1, 2}}, -1, 39 + L, 1},
	} {
		prog := &core.Program{}
		costs := make([]OpCost, len(tc.ops))
		for i, o := range tc.ops {
			prog.Ops = append(prog.Ops, core.OpInfo{Syncs: int32(o[2]), Block: int32(o[3])})
			costs[i] = OpCost{Fwd: o[0] * 1e-6, FwdCPU: o[1] * 1e-6}
		}
		var ct ComputeTime
		for _, c := range costs {
			ct.Forward += c.Fwd
			ct.ForwardCPU += c.FwdCPU
		}
		SyncsOf(&ct, prog, costs, func(i int) bool { return i == tc.rec })
		got, n := ct.HostSync(), int64(ct.Syncs)
		if math.Abs(got*1e6-tc.want) > 1e-6 || n != tc.syncs {
			t.Errorf("%s: %.4f µs in %d syncs, want %.4f µs in %d", tc.name, got*1e6, n, tc.want, tc.syncs)
		}
	}
}
