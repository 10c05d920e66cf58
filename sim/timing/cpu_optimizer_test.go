package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// DeepSpeedCPUAdam's step, counted by hand (cpu_optimizer.go): per
// element the update reads the fp32 parameter, gradient, exp_avg and
// exp_avg_sq and writes the parameter and both moments (7 x 4 = 28 B),
// then the cast of the updated value to the GPU's parameter dtype reads 4
// B and writes 2 (bf16, fp16) or 4 (fp32): 34 or 36 B. SGD with momentum
// has one fp32 state: 3 x 4 + 2 x 4 + 4 + 2 = 26 B.
func TestCPUOptimizerHandCounted(t *testing.T) {
	prec := func(name string) core.Precision {
		p, err := core.LookupPrecision(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		plan     core.Plan
		elements float64
		ranks    int64
		want     float64 // seconds
	}{
		{"adamw bf16, one GPU, default host", core.Plan{Optimizer: core.Optimizer{Kind: core.AdamW}, Precision: prec("bf16")},
			1e9, 1, 34e9 / (hw.DefaultHostGBps * 1e9)},
		{"adamw fp16-master, 8 ranks share a 100 GB/s host", core.Plan{Optimizer: core.Optimizer{Kind: core.AdamW}, Precision: prec("fp16-master"),
			Cluster: hw.Cluster{HostGBps: 100}}, 1e9, 8, 8 * 34e9 / 100e9},
		{"adam fp32 params", core.Plan{Optimizer: core.Optimizer{Kind: core.Adam}, Precision: prec("fp32"),
			Cluster: hw.Cluster{HostGBps: 200}}, 5e8, 2, 2 * 5e8 * 36 / 200e9},
		{"sgd momentum", core.Plan{Optimizer: core.Optimizer{Kind: core.SGD, Momentum: 0.9}, Precision: prec("bf16"),
			Cluster: hw.Cluster{HostGBps: 100}}, 1e9, 1, 26e9 / 100e9},
		{"nothing on the host", core.Plan{Optimizer: core.Optimizer{Kind: core.AdamW}, Precision: prec("bf16")}, 0, 8, 0},
	} {
		got := CPUOptimizerSeconds(&tc.plan, tc.elements, tc.ranks)
		if math.Abs(got-tc.want) > 1e-12*max(1, tc.want) {
			t.Errorf("%s: %.6g s, want %.6g s", tc.name, got, tc.want)
		}
	}
}

// The GPUs of a node share its host: as many ranks as the node holds,
// fewer when the layout is smaller.
func TestRanksPerHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan core.Plan
		want int64
	}{
		{"one GPU", core.Plan{}, 1},
		{"dp 4 on a default node", core.Plan{Parallel: core.Parallelism{DP: 4}}, 4},
		{"dp 16 on 8-GPU nodes", core.Plan{Parallel: core.Parallelism{DP: 16}}, 8},
		{"dp 8 on 4-GPU nodes", core.Plan{Parallel: core.Parallelism{DP: 8}, Cluster: hw.Cluster{Nodes: 2, GPUsPerNode: 4}}, 4},
	} {
		if got := RanksPerHost(&tc.plan); got != tc.want {
			t.Errorf("%s: %d ranks per host, want %d", tc.name, got, tc.want)
		}
	}
}
