package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestDPOZeRO3: under ZeRO-3 TRL's prepare_deepspeed (and LLaMA-Factory's)
// initializes the reference copy with the trainer's stage-3 config, so its
// weights are partitioned as the policy's are: the copy adds exactly the
// policy's partitioned parameters (the same shapes and dtype; the small
// Llama ties none), it is gathered module by module in its forward and
// never in the backward (it runs under no_grad).
func TestDPOZeRO3(t *testing.T) {
	plan := func(ref string) *core.Plan {
		p := dpoPlan(ref, core.TRLLogits)
		p.Parallel = core.Parallelism{DP: 4, Zero: 3}
		return p
	}
	pre := evalPlan(t, plan(core.RefPrecomputed))
	r, err := Evaluate(plan(core.RefModel), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.States.Params != 2*pre.States.Params {
		t.Errorf("params %d with the reference copy, %d without: want twice", r.States.Params, pre.States.Params)
	}
	var fwd, bwd int
	for _, e := range r.Trace.SteadyEvents() {
		if !strings.HasPrefix(e.Op, "ref_model.") || e.Action != "alloc" {
			continue
		}
		switch e.Phase {
		case replay.PhaseForward:
			fwd++
		case replay.PhaseBackward:
			bwd++
		}
	}
	if fwd == 0 || bwd != 0 {
		t.Errorf("the reference's allocations: %d in the forward, %d in the backward; want some, none", fwd, bwd)
	}
}
