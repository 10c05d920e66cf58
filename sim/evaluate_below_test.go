package sim

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// belowPlan is a small Llama on a Megatron layout with a pipeline (TP 2,
// PP 2, DP 2, distributed optimizer, 4 micro-batches): its stages replay
// a first step before the steady one (replay/lazy_states.go).
func belowPlan(t *testing.T) *core.Plan {
	p := distPlan(t, testmodels.Llama(512, 4, 8, 4, 1408, 32000, "flash"), "megatron", core.Parallelism{DP: 2, TP: 2, PP: 2, SequenceParallel: true, DistributedOptimizer: true})
	p.Seq, p.GradAccum = 1024, 4
	return p
}

// limits is a grid of device-memory limits from 0 to just past used.
func limits(used int64) []int64 {
	var out []int64
	for k := int64(0); k <= 64; k++ {
		out = append(out, used*k/64)
	}
	return append(out, used+1, math.MaxInt64)
}

// RunBelow stops after the first step only when the steady step's device
// memory reaches the limit, and otherwise replays what Run replays. It
// does stop early: for a limit below the first step's reserve it returns
// no replay, where the steady step is never reached.
func TestRunBelowStopsOnlyPastTheLimit(t *testing.T) {
	stages, err := stagePlans(belowPlan(t))
	if err != nil {
		t.Fatal(err)
	}
	for s, plan := range stages {
		prog, err := plan.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		full, err := replay.Run(prog, plan, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		used := full.Report().DeviceUsed
		stopped := 0
		for _, limit := range limits(used) {
			r, err := replay.RunBelow(prog, plan, core.Options{}, limit)
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				stopped++
				if used < limit {
					t.Errorf("stage %d: stopped at limit %d, but the step uses %d", s, limit, used)
				}
				continue
			}
			if got := r.Report(); got.DeviceUsed != used || got.PeakAllocated != full.Report().PeakAllocated || got.PeakReserved != full.Report().PeakReserved {
				t.Errorf("stage %d, limit %d: device %d, allocated %d, reserved %d; Run: %d, %d, %d", s, limit,
					got.DeviceUsed, got.PeakAllocated, got.PeakReserved, used, full.Report().PeakAllocated, full.Report().PeakReserved)
			}
		}
		if stopped == 0 {
			t.Errorf("stage %d: never stopped after the first step (device %d)", s, used)
		}
	}
}

// EvaluateBelow returns no report exactly when some stage reaches the
// limit, and otherwise Evaluate's, on one worker or with the stages side
// by side (a stage beside one that reaches the limit is stopped).
func TestEvaluateBelowEqualsEvaluate(t *testing.T) {
	plan := belowPlan(t)
	full, err := Evaluate(plan, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	used := full.DeviceUsed
	for _, rr := range full.Ranks {
		used = max(used, rr.DeviceUsed)
	}
	for _, limit := range limits(used) {
		for first := int64(0); first < 2; first++ {
			for _, workers := range []int{1, 2, 3} {
				rep, err := EvaluateBelow(plan, core.Options{}, limit, first, workers)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case (rep == nil) != (used >= limit):
					t.Errorf("limit %d, stage %d first, %d workers: report %v, but the fullest stage uses %d", limit, first, workers, rep != nil, used)
				case rep != nil && (rep.DeviceUsed != full.DeviceUsed || rep.Time.StepSeconds != full.Time.StepSeconds):
					t.Errorf("limit %d, %d workers: device %d, step %g s; Evaluate: %d, %g s", limit, workers, rep.DeviceUsed, rep.Time.StepSeconds, full.DeviceUsed, full.Time.StepSeconds)
				}
			}
		}
	}
}

// A caller's context that ends stops EvaluateBelow with its error, on
// any number of workers: only the stops of its own stages (a stage
// reached the limit) end in no report without an error.
func TestEvaluateBelowCallerStop(t *testing.T) {
	plan := belowPlan(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, limit := range []int64{1 << 40, math.MaxInt64} {
		for _, workers := range []int{1, 2} {
			rep, err := EvaluateBelow(plan, core.Options{Context: ctx}, limit, 0, workers)
			if !errors.Is(err, context.Canceled) || rep != nil {
				t.Errorf("limit %d, %d workers: report %v, error %v; want context.Canceled", limit, workers, rep != nil, err)
			}
		}
	}
}
