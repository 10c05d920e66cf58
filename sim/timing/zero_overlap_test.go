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
//
// With 4 micro-steps stage 2 reduces at each (8 GB in all), and each
// micro-step's stream runs behind its own backward and exposes its own
// last bucket: 4 x 4.289 ms. With ZeRO-Offload each micro-step also
// carries its 16-bit accumulation copies (0.5 s each, 0.05 s the last
// bucket's; replay.AccumulateCopiesAt: 1, 2, 2, 2), the boundary the fp32
// copies (1 s, 0.1 s): behind a 0.5 s backward the first micro-step
// shows its last bucket's 0.05 s of copies, the middle ones 8.578 +
// 1000 - 500 - 4.289 ms each, the last 8.578 + 2000 - 500 - 4.289 ms.
// Stage 1 reduces once, at the boundary, which carries its 2
// accumulation copies and the fp32 copies: 8.578 + 2000 - 500 - 4.289 ms.
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
		zero                 int
		m                    int64 // micro-steps
		overlap              bool
		backward             float64
		copies, lastCopy     float64
		acc, accLast         float64
		wantDP, wantCopyLeft float64
	}{
		{"off", 2, 1, false, 2, 0, 0, 0, 0, full + full, 0},
		{"on", 2, 1, true, 2, 0, 0, 0, 0, last + full, 0},
		{"on, offload copies hidden", 2, 1, true, 2, 1, 0.1, 0, 0, last + full, 0.1},
		{"on, offload copies outlast the backward", 2, 1, true, 0.5, 1, 0.1, 0, 0, last + full, full + 1 - 0.5 - last},
		{"off, 4 micro-steps", 2, 4, false, 2, 0, 0, 0, 0, 4*full + full, 0},
		{"on, 4 micro-steps: a last bucket each", 2, 4, true, 2, 0, 0, 0, 0, 4*last + full, 0},
		{"on, 4 micro-steps, accumulation copies", 2, 4, true, 0.5, 1, 0.1, 0.5, 0.05, 4*last + full,
			0.05 + 2*(full+1-0.5-last) + (full + 2 - 0.5 - last)},
		{"stage 1, on, 4 micro-steps, accumulation copies", 1, 4, true, 0.5, 1, 0.1, 0.5, 0.05, last + full, full + 2 - 0.5 - last},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: row.m, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
			Parallel: core.Parallelism{DP: 8, Zero: row.zero, OverlapComm: row.overlap}}
		reduced := int64(2 * n)
		if row.zero == 2 {
			reduced *= row.m // stage 2 reduces at every micro-step (replay's stepComm)
		}
		w := &GpuWork{M: row.m, Mb: ComputeTime{Forward: 1, Backward: row.backward}, Mode: replay.DistZeRO, Zero: row.zero,
			gradCopy: row.copies, gradCopyLast: row.lastCopy, accCopy: row.acc, accCopyLast: row.accLast, DpComm: []core.CommRecord{
				{Kind: "reduce_scatter", Group: "dp", Bytes: reduced, Backward: true},
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

// SetZeROOffloadCopies takes from the exposed host transfers exactly the
// copies it puts on the reduction stream: with overlap_comm, at stage 2
// and 4 micro-steps, the fp32 partition once and the 16-bit one 7 times
// (replay.AccumulateCopies); without overlap_comm, at stage 3 or in
// evaluation, nothing moves.
func TestSetZeROOffloadCopies(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	// bf16, as DeepSpeed runs bf16-mixed: 16-bit parameters
	// (core.Plan.DeepspeedPrecision); n partition elements, under one
	// bucket's share (5e8 / 2).
	prec, _ := core.LookupPrecision("bf16")
	const n = 100_000_000
	for _, row := range []struct {
		name    string
		zero    int
		overlap bool
		eval    bool
		moved   int64 // bytes taken from host
	}{
		{"stage 2, overlap_comm", 2, true, false, 4*n + 7*2*n},
		{"stage 1, overlap_comm", 1, true, false, 4*n + 2*2*n},
		{"stage 2, no overlap_comm", 2, false, false, 0},
		{"stage 3", 3, false, false, 0},
		{"stage 2, overlap_comm, evaluation", 2, true, true, 0},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: 4, Parallel: core.Parallelism{DP: 2, Zero: row.zero, OverlapComm: row.overlap}}
		w := &GpuWork{M: 4, Mode: replay.DistZeRO, Zero: row.zero, Eval: row.eval}
		w.SetHost(10)
		w.SetZeROOffloadCopies(plan, n)
		if got, want := 10-w.host, PCIeSeconds(dev, row.moved); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %.6f s moved off the exposed host transfers, want %.6f s", row.name, got, want)
		}
		if row.moved > 0 && (w.gradCopyLast != w.gradCopy || w.accCopyLast != w.accCopy) {
			t.Errorf("%s: a partition under one bucket's share is its own last bucket: %g/%g, %g/%g", row.name, w.gradCopyLast, w.gradCopy, w.accCopyLast, w.accCopy)
		}
	}
}
