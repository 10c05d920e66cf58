package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestZeROOverlapComm counts by hand what DeepSpeed ZeRO-2 exposes with
// and without overlap_comm: one billion bf16 parameters, dp 8 inside an
// A100 node (a 204 GB/s bus, TestMegatronDPOverlapFlags), so a ring
// collective of B bytes takes B x 7/8 / 204 GB/s:
//
//	reduce-scatter of the bf16 gradients       2 GB  8.578 ms
//	all-gather of the updated bf16 partitions  2 GB  8.578 ms
//	the last bucket (reduce_bucket_size 5e8 x 2 B)   4.289 ms
//
// Off (DeepSpeed's default at stage 2) both run after the backward. On,
// the reduction runs behind the backward (2 s) but for the last bucket;
// the gather stays exposed. With ZeRO-Offload the fp32 gradients' copies
// to the host follow each bucket's reduction on the same stream: 1 s of
// copies (0.1 s the last bucket's) hide behind a 2 s backward but for
// the last bucket's, and behind a 0.5 s one show 1.0086 - 0.5 s.
func TestZeROOverlapComm(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	dev.LinkGBps = 300
	prec, _ := core.LookupPrecision("bf16")
	const n = 1_000_000_000
	const full, last = 8.578e-3, 4.289e-3
	for _, row := range []struct {
		name                 string
		overlap              bool
		backward             float64
		copies, lastCopy     float64
		wantDP, wantCopyLeft float64
	}{
		{"off", false, 2, 0, 0, full + full, 0},
		{"on", true, 2, 0, 0, last + full, 0},
		{"on, offload copies hidden", true, 2, 1, 0.1, last + full, 0.1},
		{"on, offload copies outlast the backward", true, 0.5, 1, 0.1, last + full, full + 1 - 0.5 - last},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: 1, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
			Parallel: core.Parallelism{DP: 8, Zero: 2, OverlapComm: row.overlap}}
		w := &GpuWork{M: 1, Mb: ComputeTime{Forward: 1, Backward: row.backward}, Mode: replay.DistZeRO, Zero: 2,
			gradCopy: row.copies, gradCopyLast: row.lastCopy, DpComm: []core.CommRecord{
				{Kind: "reduce_scatter", Group: "dp", Bytes: 2 * n, Backward: true},
				{Kind: "all_gather", Group: "dp", Bytes: 2 * n},
			}}
		c := w.exposedComm(plan)
		var dp float64
		for _, s := range c.tail {
			if s.Name == "dp_comm" {
				dp = s.Seconds
			}
		}
		if math.Abs(dp/row.wantDP-1) > 0.02 { // NCCL's latency is a few % of a bucket
			t.Errorf("%s: dp_comm %.4f ms, hand count %.4f ms", row.name, 1e3*dp, 1e3*row.wantDP)
		}
		if math.Abs(c.gradCopy-row.wantCopyLeft) > 2e-4 {
			t.Errorf("%s: offload copies left exposed %.4f s, hand count %.4f s", row.name, c.gradCopy, row.wantCopyLeft)
		}
	}
}
