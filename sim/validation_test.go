package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// The validation pass frees everything it allocated: over random models
// and plans, allocated memory after its last event equals allocated
// memory before its first, the step's peak is at least the pass's, and
// the report invariants hold.
func TestValidationPassFreesEverything(t *testing.T) {
	for _, c := range randomCases(4, 30) {
		p := withPlan(c.plan, func(q *core.Plan) { q.Validation = true })
		rep, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatalf("%s: %v", c.desc, err)
		}
		if probs := reportProblems(rep); len(probs) > 0 {
			t.Fatalf("%s: %s", c.desc, strings.Join(probs, "; "))
		}
		first, last := -1, -1
		var passPeak int64
		for i, pt := range rep.Timeline {
			if pt.Phase == replay.PhaseValidation {
				if first < 0 {
					first = i
				}
				last = i
				passPeak = max(passPeak, pt.Allocated)
			}
		}
		if first <= 0 {
			t.Fatalf("%s: no validation events after the setup", c.desc)
		}
		if before, after := rep.Timeline[first-1].Allocated, rep.Timeline[last].Allocated; before != after {
			t.Errorf("%s: allocated %d before the validation pass, %d after", c.desc, before, after)
		}
		if passPeak > rep.PeakAllocated {
			t.Errorf("%s: validation reaches %d, the step's peak is %d", c.desc, passPeak, rep.PeakAllocated)
		}
		if rep.Timeline[last].Op != "end of validation" {
			t.Errorf("%s: the validation pass ends at %q", c.desc, rep.Timeline[last].Op)
		}
	}
}

// A validation pass needs a training step on one GPU.
func TestValidationRefusals(t *testing.T) {
	base := randomCases(5, 1)[0].plan
	for _, c := range []struct {
		name   string
		change func(p *core.Plan)
		want   string
	}{
		{"eval phase", func(p *core.Plan) { p.Phase = core.Eval }, `validation=True adds a validation pass before a training step, and phase is "eval"`},
		{"data parallel", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2} }, "validation=True is modelled on one GPU"},
		{"offload", func(p *core.Plan) { p.Offload = &core.Offload{Optimizer: "cpu"} }, "validation=True is not modelled with offload="},
	} {
		p := withPlan(base, func(q *core.Plan) { q.Validation = true; c.change(q) })
		_, err := Evaluate(p, core.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
