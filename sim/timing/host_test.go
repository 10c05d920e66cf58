package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// Offload traffic crosses PCIe at the rate a copy to or from pinned host
// memory reaches (hw.KernelRates.PCIe), not at the link's line rate.
// Counted by hand, 98 GB each way (196e9 B in all):
//
//   - H200, PCIe Gen5 x16, 64 GB/s per direction at 49/64 of it (NVIDIA's
//     ~49 GB/s on a DGX-H100): 196e9 / 49e9 = 4 s;
//   - A100 80GB, Gen4 x16, 32 GB/s at 26.2/32 (bandwidthTest, pinned):
//     196e9 / 26.2e9 = 7.4809 s;
//   - V100, Gen3 x16, 16 GB/s at the default 0.80: 196e9 / 12.8e9 =
//     15.3125 s.
func TestOffloadAtPinnedCopyRate(t *testing.T) {
	for _, tc := range []struct {
		gpu  string
		want float64 // seconds
	}{
		{"H200", 4},
		{"A100", 196e9 / 26.2e9},
		{"V100", 15.3125},
	} {
		d, err := hw.LookupDevice(tc.gpu)
		if err != nil {
			t.Fatal(err)
		}
		r := &replay.Replay{Plan: &core.Plan{Device: d}, Rep: &replay.Report{}}
		r.Rep.Traffic.PCIe = 196e9
		if got := hostSeconds(r); math.Abs(got/tc.want-1) > 1e-9 {
			t.Errorf("%s: 196 GB over PCIe in %.4f s, want %.4f s", tc.gpu, got, tc.want)
		}
	}
}
