package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// ZeRO-Infinity's NVMe time, counted by hand (nvme.go): reads at the read
// rate plus writes at the write rate, times the ranks of the node sharing
// the drives. The defaults are DeepSpeed's measured 4 x Gen4 RAID-0
// (hw.DefaultNVMe): 10 GB/s reads, 5 GB/s writes.
func TestNVMeSecondsHandCounted(t *testing.T) {
	adamw := replay.NVMeIO{GradWrite: 4e9, StepRead: 16e9, StepWrite: 12e9} // 1e9 elements, AdamW
	for _, tc := range []struct {
		name  string
		c     hw.Cluster
		io    replay.NVMeIO
		ranks int64
		want  float64
	}{
		{"adamw 1e9 elements, one GPU, default rates", hw.Cluster{}, adamw, 1, 16e9/10e9 + 16e9/5e9},
		{"8 ranks share the node's drives", hw.Cluster{}, adamw, 8, 8 * (16e9/10e9 + 16e9/5e9)},
		{"a measured 8 x Gen5 node (deepnvme 06-2025: 48 and 26 GB/s)", hw.Cluster{NVMeReadGBps: 48, NVMeWriteGBps: 26}, adamw, 8, 8 * (16e9/48e9 + 16e9/26e9)},
		{"only reads set: writes keep the default", hw.Cluster{NVMeReadGBps: 20}, adamw, 1, 16e9/20e9 + 16e9/5e9},
		{"parameters: two gathers' reads and the step's write", hw.Cluster{}, replay.NVMeIO{ParamRead: 8e9, ParamWrite: 4e9}, 2, 2 * (8e9/10e9 + 4e9/5e9)},
		{"nothing on NVMe", hw.Cluster{}, replay.NVMeIO{}, 8, 0},
	} {
		p := &core.Plan{Cluster: tc.c}
		if got := NVMeSeconds(p, tc.io, tc.ranks); math.Abs(got-tc.want) > 1e-12*max(1, tc.want) {
			t.Errorf("%s: %.6f s, want %.6f", tc.name, got, tc.want)
		}
	}
}
