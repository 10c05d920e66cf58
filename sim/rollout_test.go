package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// Every rollout step keeps what one step keeps for the backward, and the
// steps share the parameters: in fp32 (no autocast weight copies) the
// saved activations of n steps are n times one step's, exactly, and the
// trainable parameters and their state do not change.
func TestRolloutKeepsEachStep(t *testing.T) {
	var one *replay.Report
	for _, n := range []int64{1, 2, 3} {
		for _, mode := range []string{"stacked", "sequential"} {
			p := tinyGraphPlan(t, 2, mode, "fp32")
			p.Rollout = n
			r, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 && mode == "stacked" {
				one = r
				continue
			}
			if mode == "stacked" && r.SavedActivations != n*one.SavedActivations {
				t.Errorf("rollout %d: saved %d bytes, want %d x %d", n, r.SavedActivations, n, one.SavedActivations)
			}
			if r.TrainableParams != one.TrainableParams || r.States.Optimizer != one.States.Optimizer || r.States.Params != one.States.Params || r.States.Buffers != one.States.Buffers {
				t.Errorf("rollout %d %s: params %d, states %+v, want %d, %+v", n, mode, r.TrainableParams, r.States, one.TrainableParams, one.States)
			}
			if r.PeakAllocated <= one.PeakAllocated && n > 1 {
				t.Errorf("rollout %d %s: peak %d, not above one step's %d", n, mode, r.PeakAllocated, one.PeakAllocated)
			}
		}
	}
}

func TestRolloutErrors(t *testing.T) {
	p := tinyGraphPlan(t, 2, "stacked", "fp32")
	p.Model.Data = nil
	p.Rollout = 2
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "builds each step's input from the data batch") {
		t.Errorf("rollout without a data batch: %v", err)
	}
	p = tinyGraphPlan(t, 2, "stacked", "fp32")
	p.Rollout = -1
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "rollout must be at least 1") {
		t.Errorf("negative rollout: %v", err)
	}
}
