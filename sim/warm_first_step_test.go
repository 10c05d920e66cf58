package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestWarmFirstStepByHand: the steady step on one GPU runs in the cache
// its first step left (replay/lazy_states.go), counted by hand on
// TestReplayLinearByHand's step: one fp32 Linear(1024 -> 4096), no bias,
// MSE, AdamW (foreach), batch 2 x 512, two cuBLAS workspaces of 8,519,680
// B. The caching allocator gives a request under 1 MiB a 2 MiB small
// segment, one under 10 MiB a 20 MiB segment, a larger one a segment of
// its own size (rounded to 2 MiB), and takes the smallest cached block
// that fits first.
//
// Step 1 (no AdamW state yet):
//
//	weight                 16 MiB  segment A (16 MiB)
//	two workspaces      2 x 8.125  segment B (20 MiB; 3.75 MiB left)
//	input                   4 MiB  segment C (20 MiB)
//	output                 16 MiB  C's other 16 MiB
//	loss, its seed        2 x 4 B  segment D (small, 2 MiB)
//	grad of output         16 MiB  segment E (16 MiB)
//	weight grad            16 MiB  the output's block in C (freed)
//	exp_avg                16 MiB  E (the output's gradient is freed)
//	exp_avg_sq             16 MiB  segment F (16 MiB)
//	step temporary         16 MiB  segment G (16 MiB)
//
// zero_grad and the end of the step free the gradient and the input: C
// and G are cached whole. Step 2:
//
//	input                   4 MiB  G (16 MiB, the smallest cached block that fits; C is 20)
//	output                 16 MiB  C
//	grad of output         16 MiB  segment H (16 MiB): E holds exp_avg
//
// Reserved: A + B + C + D + E + F + G + H = 16 + 20 + 20 + 2 + 6 x 16 =
// 122 MiB, where the steady step alone on an empty cache reserved 106
// MiB (the moments in segments of their own before the step, the step
// temporary in the freed segment of the output's gradient: A, two moment
// segments, B, C, D, E). Allocated is the steady step's, as
// TestReplayLinearByHand counts it.
func TestWarmFirstStepByHand(t *testing.T) {
	const MiB = 1 << 20
	m := &core.Model{Name: "lin", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}}, Loss: "mse"}
	plan := &core.Plan{Model: m, Batch: 2, Seq: 512, GradAccum: 1, Members: 1,
		Precision: core.Precisions()[0], Optimizer: core.Optimizer{Kind: core.AdamW},
		Device: hw.Device{Name: "test", Memory: 80 << 30}}
	rep, err := Evaluate(plan, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(122 * MiB); rep.PeakReserved != want {
		t.Errorf("peak reserved %d, want %d (122 MiB)", rep.PeakReserved, want)
	}
	if want := int64(84*MiB + 2*8_519_680 + 1024); rep.PeakAllocated != want {
		t.Errorf("peak allocated %d, want %d, the steady step's", rep.PeakAllocated, want)
	}
	tr := rep.Trace
	if tr.Steady == 0 {
		t.Fatal("the trace holds one step; want the first step's events before the steady one's")
	}
	// where step 1 put a tensor (its first allocation by name, or the
	// segment made for it), and where step 2 put it
	at := func(events []replay.TraceEvent, tensor string) (addr int64, newSegment bool) {
		for i, e := range events {
			if e.Action == "alloc" && e.Tensor == tensor {
				return e.Addr, i > 0 && events[i-1].Action == "segment_alloc"
			}
		}
		t.Fatalf("no allocation of %s", tensor)
		return 0, false
	}
	first, steady := tr.Events[:tr.Steady], tr.SteadyEvents()
	g, _ := at(first, "linear.weight step temporary")
	e, _ := at(first, "grad of linear.out")
	c, _ := at(first, "inputs")
	if a, _ := at(first, "linear.weight exp_avg"); a != e {
		t.Errorf("exp_avg at %d, want in the output's gradient's block of step 1 (%d)", a, e)
	}
	if a, seg := at(steady, "inputs"); a != g || seg {
		t.Errorf("step 2's input at %d (new segment %v), want in step 1's step temporary's segment (%d)", a, seg, g)
	}
	if a, seg := at(steady, "linear.out"); a != c || seg {
		t.Errorf("step 2's output at %d (new segment %v), want where step 1's input began (%d)", a, seg, c)
	}
	if a, seg := at(steady, "grad of linear.out"); a == e || !seg {
		t.Errorf("step 2's output gradient at %d (new segment %v), want a new segment (step 1's holds exp_avg)", a, seg)
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
