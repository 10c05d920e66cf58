package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

func steps(t *testing.T, p *core.Plan, rows []int64, pool string) *replay.StepsReport {
	t.Helper()
	s, err := EvaluateSteps(p, core.Options{}, replay.StepSeries{TableRows: rows, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTableStepsPadded: with pad_rows every step has the same tensors, so
// nothing grows, whatever the pool: under PyTorch's allocator alone every
// step's peaks equal a single Evaluate's (the persistent state is carried
// exactly). The exact pool parks the table's own buffers where the caching
// allocator cannot hand them to other requests: the foreach optimizer's
// per-parameter temporaries (core.Optimizer.StepTemporary) that reuse
// those blocks under PyTorch's allocator take new segments there, so its
// reserved peak is above a single Evaluate's (14 MiB on the device, 16 on
// the host), the same every step.
func TestTableStepsPadded(t *testing.T) {
	for _, place := range []string{"device", "host"} {
		for _, pool := range []string{"torch", "exact"} {
			p := ngramPlan(t, 1<<20, "sparse", place, true)
			one, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := steps(t, p, []int64{7000, 7900, 6800, 8100}, pool)
			// The exact pool keeps the row-wise AdamW's four gathered-row
			// buffers parked from step 1 on: 4 x 1 MiB more at the peak
			// (in the backward) of every later step, on the device only.
			extra := int64(0)
			if pool == "exact" && place == "device" {
				extra = 4 * 8192 * 32 * 4
			}
			reserved := one.PeakReserved
			if pool == "exact" {
				reserved = s.Steps[0].PeakReserved
				if reserved < one.PeakReserved {
					t.Errorf("%s exact: reserved %d, below a single Evaluate's %d under PyTorch's allocator alone", place, reserved, one.PeakReserved)
				}
			}
			for _, st := range s.Steps {
				want := one.PeakAllocated
				if st.Step > 1 {
					want += extra
				}
				if st.LeafRows != 8192 || st.PeakAllocated != want || st.PeakReserved != reserved || !st.Fits {
					t.Errorf("%s %s step %d: rows %d allocated %d reserved %d, want 8192, %d, %d",
						place, pool, st.Step, st.LeafRows, st.PeakAllocated, st.PeakReserved, want, reserved)
				}
			}
		}
	}
}

// TestTableStepsUnpadded: PyTorch's caching allocator alone reuses cached
// blocks for new sizes (reserved stays once every size has been seen); an
// exact-size pool keeps one set of buffers per size. Hand-checked: a head's
// leaf of 7,000 rows x 32 fp32 is 896,000 B (a small-pool block of that
// size); per step the pool keeps 16 leaves and the 4 gathered-row buffers
// of the row-wise AdamW (reused head after head): 20 x 896,000 B =
// 17,920,000 B. 7,900 rows add 20 x 1,011,200 B = 20,224,000 B.
func TestTableStepsUnpadded(t *testing.T) {
	rows := []int64{7000, 7900, 6800, 7000, 7900, 6800}
	p := ngramPlan(t, 1<<20, "sparse", "device", false)

	torch := steps(t, p, rows, "torch")
	for k := 3; k < len(rows); k++ {
		if got, want := torch.Steps[k].EndReserved, torch.Steps[2].EndReserved; got != want {
			t.Errorf("torch step %d: reserved %d after every size was seen, want %d", k+1, got, want)
		}
		if got, want := torch.Steps[k].PeakAllocated, torch.Steps[k-3].PeakAllocated; got != want {
			t.Errorf("torch step %d: allocated %d, want %d as the step with the same rows", k+1, got, want)
		}
	}

	exact := steps(t, p, rows, "exact")
	// 6,800 rows: 870,400 B per buffer, 20 of them.
	idle := []int64{17_920_000, 17_920_000 + 20_224_000, 17_920_000 + 20_224_000 + 17_408_000, 55_552_000, 55_552_000, 55_552_000}
	for k, want := range idle {
		if got := exact.Steps[k].PoolIdle; got != want {
			t.Errorf("exact step %d: pool idle %d, want %d (sizes seen before are reused)", k+1, got, want)
		}
	}
	if g := exact.Steps[2].EndReserved - exact.Steps[0].EndReserved; g < 20_224_000 {
		t.Errorf("exact pool: reserved grew %d over three new sizes, want at least the new buffers", g)
	}
	if exact.Steps[2].EndReserved <= torch.Steps[2].EndReserved {
		t.Errorf("exact pool reserved %d, want more than the caching allocator alone (%d)", exact.Steps[2].EndReserved, torch.Steps[2].EndReserved)
	}

	// The first step of a series at the maximum is the single-step replay.
	one, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := steps(t, p, []int64{8192}, "torch"); s.Steps[0].PeakAllocated != one.PeakAllocated {
		t.Errorf("step at the maximum: allocated %d, want Evaluate's %d", s.Steps[0].PeakAllocated, one.PeakAllocated)
	}
}

func TestTableStepsErrors(t *testing.T) {
	sparse := ngramPlan(t, 1<<20, "sparse", "device", false)
	dense := ngramPlan(t, 1<<20, "dense", "device", true)
	eval := ngramPlan(t, 1<<20, "sparse", "device", false)
	eval.Phase = core.Eval
	for _, tc := range []struct {
		p    *core.Plan
		s    replay.StepSeries
		want string
	}{
		{sparse, replay.StepSeries{}, "rows_per_step is empty"},
		{sparse, replay.StepSeries{TableRows: []int64{10, 0}}, "rows_per_step[1] must be in [1, 8192] for table ngram (got 0)"},
		{sparse, replay.StepSeries{TableRows: []int64{8193}}, "rows_per_step[0] must be in [1, 8192]"},
		{sparse, replay.StepSeries{TableRows: []int64{10}, Pool: "lru"}, `unknown pool "lru" (known: torch, exact)`},
		{dense, replay.StepSeries{TableRows: []int64{10}}, `the plan has no table with grad="sparse"`},
		{eval, replay.StepSeries{TableRows: []int64{10}}, "needs a training plan"},
	} {
		_, err := EvaluateSteps(tc.p, core.Options{}, tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}
