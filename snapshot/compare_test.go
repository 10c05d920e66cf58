package snapshot

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
)

func snapshotOf(t *testing.T, m *core.Model) *Snapshot {
	t.Helper()
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "none", "A100-80GB")
	rep, err := sim.Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := FromReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestComparePointsToTheModule compares a step with one lowered wrongly
// in a single place (the MLP's hidden width: 2048 where the model has
// 2816) and checks that the comparison names the MLP as where the bytes
// were missed, in forward and backward, and nothing else.
func TestComparePointsToTheModule(t *testing.T) {
	measured := snapshotOf(t, testmodels.Llama(1024, 4, 16, 4, 2816, 32000, "flash"))
	wrong := snapshotOf(t, testmodels.Llama(1024, 4, 16, 4, 2048, 32000, "flash"))
	c := Compare(measured, wrong)
	if c.Measured.PeakAllocated <= c.Predicted.PeakAllocated {
		t.Errorf("the narrower MLP should need less: %d vs %d", c.Measured.PeakAllocated, c.Predicted.PeakAllocated)
	}
	if len(c.Modules) == 0 {
		t.Fatal("no module differs")
	}
	// Every difference is in the MLP but the optimizer step's foreach
	// temporaries, which span all parameters.
	for _, m := range c.Modules {
		if m.Module == "optimizer.step" {
			continue
		}
		if !strings.HasPrefix(m.Module, "layers.*.mlp") || m.Measured <= m.Predicted {
			t.Errorf("a difference outside the MLP, or one memsh invented: %+v", m)
		}
	}
	var b strings.Builder
	if err := c.Render(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"peak allocated", "missed", "layers.*.mlp"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the rendering lacks %q:\n%s", want, b.String())
		}
	}
	// The same step compared with itself differs nowhere.
	same := Compare(measured, measured)
	if len(same.Modules) != 0 || len(same.Sizes) != 0 || same.Measured.PeakAllocated != same.Predicted.PeakAllocated {
		t.Errorf("a step differs from itself: %+v", same)
	}
}

// TestBeforeTrace checks a snapshot recorded from a later step on: the
// parameters were allocated before the trace began, so only the final
// segments show them, and the peaks count them.
func TestBeforeTrace(t *testing.T) {
	s := &Snapshot{
		Segments: []Segment{{Address: 0, TotalSize: 4096, Blocks: []Block{
			{Address: 0, Size: 1536, RequestedSize: 1500, State: "active_allocated"},  // a parameter, from before
			{Address: 1536, Size: 512, RequestedSize: 400, State: "active_allocated"}, // a gradient, from the trace
			{Address: 2048, Size: 2048, State: "inactive"},
		}}},
		Trace: []Event{
			{Action: Alloc, Addr: 2048, Size: 2000},
			{Action: Alloc, Addr: 1536, Size: 400},
			{Action: FreeRequested, Addr: 2048, Size: 2000},
			{Action: FreeCompleted, Addr: 2048, Size: 2000},
		},
	}
	a, r := s.BeforeTrace()
	if a != 1500 || r != 4096 {
		t.Errorf("BeforeTrace = %d, %d; want 1500 (the parameter) and 4096 (its segment)", a, r)
	}
	pa, pr := s.Peaks()
	if pa != 3900 || pr != 4096 {
		t.Errorf("Peaks = %d, %d; want 3900 (1500 + 2000 + 400) and 4096", pa, pr)
	}
	c := Compare(s, s)
	if c.Measured.PeakAllocated != 3900 || c.Measured.BeforeTrace != 1500 || c.Measured.PeakEvent != 1 {
		t.Errorf("side: %+v", c.Measured)
	}
	// A snapshot whose trace holds its whole history starts from nothing.
	whole := &Snapshot{Segments: []Segment{{TotalSize: 512, Blocks: []Block{{Size: 512, RequestedSize: 400, State: "active_allocated"}}}},
		Trace: []Event{{Action: SegmentAlloc, Size: 512}, {Action: Alloc, Size: 400}}}
	if a, r := whole.BeforeTrace(); a != 0 || r != 0 {
		t.Errorf("a whole history: BeforeTrace = %d, %d; want 0, 0", a, r)
	}
}
