package hw

import (
	"math"
	"testing"
)

// Each catalog GPU's default host bandwidth, counted by hand from its
// reference system (host.go): sockets x channels x MT/s x 8 B.
func TestCatalogHostMemory(t *testing.T) {
	want := map[string]float64{
		"V100-16GB": 2 * 4 * 2400 * 8 / 1e3,  // DGX-1: 153.6
		"V100-32GB": 2 * 6 * 2666 * 8 / 1e3,  // DGX-2: 255.936
		"A100-40GB": 2 * 8 * 3200 * 8 / 1e3,  // DGX A100: 409.6
		"A100-80GB": 2 * 8 * 3200 * 8 / 1e3,  // DGX A100
		"H100-80GB": 2 * 8 * 4800 * 8 / 1e3,  // DGX H100: 614.4
		"H100-PCIe": 2 * 8 * 3200 * 8 / 1e3,  // NVIDIA's PCIe MLPerf server
		"H100-NVL":  2 * 8 * 3200 * 8 / 1e3,  // the same server stands in
		"H200":      2 * 8 * 4800 * 8 / 1e3,  // DGX H200
		"B200":      2 * 8 * 5600 * 8 / 1e3,  // DGX B200: 716.8
		"MI300X":    2 * 12 * 4800 * 8 / 1e3, // 2 x EPYC 9374F: 921.6
		"L40S":      2 * 8 * 3200 * 8 / 1e3,  // the PCIe server stands in
		"A6000":     1 * 2 * 3200 * 8 / 1e3,  // desktop DDR4: 51.2
		"RTX-3090":  1 * 2 * 3200 * 8 / 1e3,
		"RTX-4090":  1 * 2 * 5600 * 8 / 1e3, // desktop DDR5: 89.6
	}
	for _, d := range Catalog() {
		w, ok := want[d.Name]
		if !ok {
			t.Errorf("%s: no hand-counted host bandwidth in this test", d.Name)
			continue
		}
		if got := d.Host.GBps(); math.Abs(got-w) > 1e-9 {
			t.Errorf("%s: host %.3f GB/s, want %.3f (%s)", d.Name, got, w, d.Host.System)
		}
		if d.Host.System == "" || d.Host.Source == "" {
			t.Errorf("%s: host memory without its system or source: %+v", d.Name, d.Host)
		}
	}
}

// cluster(host=) wins over the GPU's reference system, which wins over
// DefaultHostGBps (a custom gpu() has no host of its own).
func TestHostRate(t *testing.T) {
	a100, err := LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	custom := Device{Name: "mine", Memory: 1 << 30}
	for _, tc := range []struct {
		name string
		c    Cluster
		dev  Device
		want float64 // GB/s
	}{
		{"cluster's figure", Cluster{HostGBps: 100}, a100, 100},
		{"the GPU's reference system", Cluster{}, a100, 409.6},
		{"a custom GPU", Cluster{}, custom, DefaultHostGBps},
		{"a custom GPU, cluster's figure", Cluster{HostGBps: 50}, custom, 50},
	} {
		if got := tc.c.HostRate(tc.dev); math.Abs(got-tc.want*1e9) > 1e-3 {
			t.Errorf("%s: %.6g B/s, want %.6g", tc.name, got, tc.want*1e9)
		}
	}
}
