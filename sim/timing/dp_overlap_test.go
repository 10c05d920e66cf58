package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestMegatronDPOverlapFlags counts by hand what Megatron's DDP exposes
// with and without --overlap-grad-reduce / --overlap-param-gather: one
// billion parameters under the distributed optimizer, dp 8 inside an
// A100 node (NVLink3 300 GB/s a direction at 68 %: a 204 GB/s bus), so a
// ring collective of B bytes takes B x 7/8 / 204 GB/s:
//
//	reduce-scatter of the fp32 gradients  4 GB  17.157 ms
//	all-gather of the bf16 parameters     2 GB   8.578 ms
//	the last gradient bucket (40 M x 4 B)        0.686 ms
//	the last parameter bucket (40 M x 2 B)       0.343 ms
//
// Overlapped (memsh's default), the backward (2 s) and the next forward
// (1 s) hide all but the last buckets; not overlapped, each collective
// runs whole after the backward or the optimizer step.
func TestMegatronDPOverlapFlags(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	dev.LinkGBps = 300
	prec, _ := core.LookupPrecision("megatron")
	const n = 1_000_000_000
	for _, row := range []struct {
		name                  string
		noGrad, noParam       bool
		wantMs, tolerancePerc float64
	}{
		{"both overlapped", false, false, 0.686 + 0.343, 10}, // NCCL's latency is a few % of a bucket
		{"gradient reduction exposed", true, false, 17.157 + 0.343, 1},
		{"parameter gather exposed", false, true, 0.686 + 8.578, 1},
		{"neither overlapped", true, true, 17.157 + 8.578, 1},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: 4, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
			Parallel: core.Parallelism{DP: 8, DistributedOptimizer: true, NoOverlapGradReduce: row.noGrad, NoOverlapParamGather: row.noParam}}
		w := &GpuWork{M: 4, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistMegatron, DpComm: []core.CommRecord{
			{Kind: "reduce_scatter", Group: "dp", Bytes: 4 * n, Backward: true},
			{Kind: "all_gather", Group: "dp", Bytes: 2 * n},
		}}
		var got float64
		for _, s := range w.exposedComm(plan).tail {
			if s.Name == "dp_comm" {
				got = 1e3 * s.Seconds
			}
		}
		if math.Abs(got/row.wantMs-1) > row.tolerancePerc/100 {
			t.Errorf("%s: dp_comm %.3f ms, hand count %.3f ms", row.name, got, row.wantMs)
		}
	}
}
