package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// firstStepPlan is two 256 x 256 linear layers (65,536 fp32 weights each,
// 256 KiB: no allocator rounding) trained with AdamW in fp32.
func firstStepPlan(first bool) *core.Plan {
	m := &core.Model{Name: "m", Layers: []core.Layer{&nn.Linear{Name: "a", In: 256, Out: 256}, &nn.Linear{Name: "b", In: 256, Out: 256}}, Loss: "mse", InputDim: 256}
	p := testmodels.LlamaPlan(m, 4, 16, "fp32", "none", "H100-80GB")
	p.FirstStep = first
	return p
}

// The first step runs its forward and backward without AdamW's moments
// (2 x 2 x 256 KiB = 1 MiB): its peak before the optimizer step is 1 MiB
// lower than the steady state's, and the step makes the moments.
func TestFirstStep(t *testing.T) {
	peakBefore := func(r *replay.Report) (peak int64, madeInStep int64) {
		for i, pt := range r.Timeline {
			if pt.Phase == replay.PhaseOptimizer {
				if i > 0 && pt.ByCat[core.CatOptimizer] > r.Timeline[i-1].ByCat[core.CatOptimizer] {
					madeInStep += pt.ByCat[core.CatOptimizer] - r.Timeline[i-1].ByCat[core.CatOptimizer]
				}
				continue
			}
			peak = max(peak, pt.Allocated)
		}
		return peak, madeInStep
	}
	steady, err := Evaluate(firstStepPlan(false), core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := Evaluate(firstStepPlan(true), core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	const moments = 2 * 2 * 256 * 256 * 4
	ps, ms := peakBefore(steady)
	pf, mf := peakBefore(first)
	if ps-pf != moments {
		t.Errorf("peak before the step: steady %d, first %d, want %d less", ps, pf, moments)
	}
	if ms != 0 || mf != moments {
		t.Errorf("optimizer state made in the step: steady %d, first %d, want 0 and %d", ms, mf, moments)
	}
	if first.States.Optimizer != steady.States.Optimizer || first.States.Optimizer != moments {
		t.Errorf("states: first %d, steady %d, want both %d", first.States.Optimizer, steady.States.Optimizer, moments)
	}
}

func TestFirstStepErrors(t *testing.T) {
	p := firstStepPlan(true)
	p.Phase = core.Eval
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), `first_step=True replays the optimizer's first step, and phase is "eval"`) {
		t.Errorf("eval: %v", err)
	}
	p = firstStepPlan(true)
	p.Offload = &core.Offload{Optimizer: "cpu"}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "not with offload=") {
		t.Errorf("offload: %v", err)
	}
}
