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
