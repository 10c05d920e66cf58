package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestWarmFirstStepFSDP2ByHand: under FSDP2 the steady step runs in the
// cache its first step left, each stream's segments kept by their stream
// (replay/lazy_states.go), counted by hand on TestWarmFirstStepByHand's
// Linear(1024 -> 4096), fp32, AdamW (foreach), batch 2 x 512, sharded
// over two ranks: fully_shard on the root, a weight shard of 8 MiB, its
// all-gather output (16 MiB, on the all-gather stream) and the unsharded
// parameters it is copied out to (16 MiB, compute stream), the
// reduce-scatter input (16 MiB, compute) and the sharded gradient (8 MiB,
// the reduce-scatter stream). Segment sizes as TestWarmFirstStepByHand
// gives them; a stream's blocks serve only that stream.
//
// Step 1 (no AdamW state yet):
//
//	weight shard, workspace   8 + 8.125  segment A (20 MiB)
//	workspace, inputs         8.125 + 4  segment B (20 MiB)
//	all-gather output                16  all-gather stream, segment G (16 MiB)
//	unsharded parameters             16  segment C (16 MiB)
//	output                           16  segment D (16 MiB)
//	loss, its seed              2 x 4 B  segment E (small, 2 MiB)
//	grad of output                   16  segment F (16 MiB)
//	weight grad                      16  D (the output is freed)
//	reduce-scatter input             16  F (the output's gradient is freed)
//	sharded gradient                  8  reduce-scatter stream, segment R (20 MiB)
//	exp_avg, exp_avg_sq           8 + 8  C (the unsharded parameters are freed)
//	step temporary                    8  F
//
// zero_grad and the end of the step free the sharded gradient (R cached,
// on its stream) and the inputs. Step 2: the inputs in B, the all-gather
// output in G, the unsharded parameters in F, the output in D, the loss in
// E, and the output's gradient in a new segment H (16 MiB: C holds the
// moments); the sharded gradient takes R again. Reserved: A + B + G + C +
// D + E + F + R + H = 20 + 20 + 16 + 16 + 16 + 2 + 16 + 20 + 16 = 142 MiB,
// where the steady step alone on an empty cache reserved 146 MiB (the
// moments before the step, in A's remainder and a 20 MiB segment of their
// own, the inputs in A's last 4 MiB, then 16 MiB segments for the
// unsharded parameters, the output and its gradient, and the step
// temporary in a third 20 MiB segment's remainder). Allocated is the
// steady step's, unchanged (96,732,160 B).
func TestWarmFirstStepFSDP2ByHand(t *testing.T) {
	const MiB = 1 << 20
	m := &core.Model{Name: "lin", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}}, Loss: "mse"}
	plan := &core.Plan{Model: m, Batch: 2, Seq: 512, GradAccum: 1, Members: 1,
		Precision: core.Precisions()[0], Optimizer: core.Optimizer{Kind: core.AdamW},
		Device: hw.Device{Name: "test", Memory: 80 << 30}, Parallel: core.Parallelism{DP: 2, FSDP: true}}
	rep, err := Evaluate(plan, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(142 * MiB); rep.PeakReserved != want {
		t.Errorf("peak reserved %d, want %d (142 MiB)", rep.PeakReserved, want)
	}
	if want := int64(96_732_160); rep.PeakAllocated != want {
		t.Errorf("peak allocated %d, want %d, the steady step's", rep.PeakAllocated, want)
	}
	for _, tc := range []struct {
		stream string
		want   int64
	}{{"compute", 106 * MiB}, {"all_gather", 16 * MiB}, {"reduce_scatter", 20 * MiB}} {
		if got := streamPeak(rep, tc.stream); got != tc.want {
			t.Errorf("%s stream reserved %d, want %d", tc.stream, got, tc.want)
		}
	}
	tr := rep.Trace
	if tr.Steady == 0 {
		t.Fatal("the trace holds one step; want the first step's events before the steady one's")
	}
	at := func(events []replay.TraceEvent, tensor string) (addr int64, stream alloc.Stream, newSegment bool) {
		for i, e := range events {
			if e.Action == "alloc" && e.Tensor == tensor {
				return e.Addr, e.Stream, i > 0 && events[i-1].Action == "segment_alloc"
			}
		}
		t.Fatalf("no allocation of %s", tensor)
		return 0, 0, false
	}
	first, steady := tr.Events[:tr.Steady], tr.SteadyEvents()
	c, _, _ := at(first, "root unsharded parameters")
	if a, _, _ := at(first, "linear.weight exp_avg"); a != c {
		t.Errorf("exp_avg at %d, want where step 1's unsharded parameters were (%d)", a, c)
	}
	for _, tensor := range []string{"root all-gather output", "root sharded grads", "inputs", "linear.out"} {
		a1, s1, _ := at(first, tensor)
		a2, s2, seg := at(steady, tensor)
		if a2 != a1 || s2 != s1 || seg {
			t.Errorf("step 2's %s at %d on stream %d (new segment %v), want step 1's block (%d on stream %d)", tensor, a2, s2, seg, a1, s1)
		}
	}
	if _, s, seg := at(steady, "grad of linear.out"); s != replay.StreamCompute || !seg {
		t.Errorf("step 2's output gradient on stream %d (new segment %v), want a new compute segment (C holds the moments)", s, seg)
	}
	segs := 0
	for _, ev := range steady {
		if ev.Action == "segment_alloc" {
			segs++
		}
	}
	if segs != 1 {
		t.Errorf("step 2 makes %d segments, want 1", segs)
	}
}
