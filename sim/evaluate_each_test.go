package sim

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// EvaluateBelowEach gives each plan EvaluateBelow's answer at its limit
// (no report exactly when its fullest stage reaches it, else Evaluate's
// report), with several plans on one pool, a plan whole among them, a
// limit of 0 (not replayed) and, with falling, a limit that falls to the
// least device memory of the plans before it that ended: a plan's report
// is nil only when it reaches the limit it could have been given.
func TestEvaluateBelowEachEqualsEvaluateBelow(t *testing.T) {
	staged := belowPlan(t)
	whole := *staged
	whole.Parallel.PP = 1
	full, err := Evaluate(staged, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	used := full.DeviceUsed
	for _, rr := range full.Ranks {
		used = max(used, rr.DeviceUsed)
	}
	wholeFull, err := Evaluate(&whole, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plans := []*core.Plan{staged, &whole, staged, staged, &whole, staged}
	firsts := []int64{0, 0, 1, 0, 0, 1}
	for _, c := range []struct {
		name    string
		limit   int64
		falling bool
		zero    int // this plan's limit is 0 (-1: none)
	}{
		{"no limit", math.MaxInt64, false, -1},
		{"over", used, false, -1},
		{"just under", used + 1, false, 3},
		{"falling", math.MaxInt64, true, -1},
		{"falling, one dropped", math.MaxInt64, true, 2},
	} {
		for _, workers := range []int{1, 2, 3} {
			var mu sync.Mutex
			reps := make([]*replay.Report, len(plans))
			ended := make([]bool, len(plans))
			calls := make([]int, len(plans))
			limitOf := func(i int) int64 {
				if i == c.zero {
					return 0
				}
				mu.Lock()
				defer mu.Unlock()
				l := c.limit
				for j := range i {
					if c.falling && ended[j] && reps[j] != nil {
						l = min(l, reps[j].DeviceUsed)
					}
				}
				return l
			}
			EvaluateBelowEach(plans, firsts, core.Options{}, workers, limitOf, func(i int, rep *replay.Report, err error) {
				if err != nil {
					t.Errorf("%s, %d workers: plan %d: %v", c.name, workers, i, err)
				}
				mu.Lock()
				defer mu.Unlock()
				reps[i], ended[i] = rep, true
				calls[i]++
			})
			least := c.limit // the least limit plan i could have been given
			for i, rep := range reps {
				want, need := full, used
				if plans[i] == &whole {
					want, need = wholeFull, wholeFull.DeviceUsed
				}
				switch {
				case calls[i] != 1:
					t.Errorf("%s, %d workers: plan %d: done called %d times", c.name, workers, i, calls[i])
				case i == c.zero:
					if rep != nil && plans[i] != &whole {
						t.Errorf("%s, %d workers: plan %d has a limit of 0, but a report", c.name, workers, i)
					}
				case rep == nil && plans[i] == &whole:
					t.Errorf("%s, %d workers: plan %d whole: no report", c.name, workers, i)
				case rep == nil && need < least:
					t.Errorf("%s, %d workers: plan %d: no report, but it uses %d, under %d", c.name, workers, i, need, least)
				case rep != nil && plans[i] != &whole && need >= c.limit:
					t.Errorf("%s, %d workers: plan %d: a report, but it uses %d, past %d", c.name, workers, i, need, c.limit)
				case rep != nil && (rep.DeviceUsed != want.DeviceUsed || rep.Time.StepSeconds != want.Time.StepSeconds):
					t.Errorf("%s, %d workers: plan %d: device %d, step %g s; Evaluate: %d, %g s", c.name, workers, i, rep.DeviceUsed, rep.Time.StepSeconds, want.DeviceUsed, want.Time.StepSeconds)
				}
				if c.falling && i != c.zero && plans[i] != &whole {
					least = min(least, need)
				}
			}
		}
	}
}

// Options.Below stops a replay as RunBelow's limit does once it falls
// there: set before the replay, at 0 it returns no replay, past the
// step's device memory the whole replay.
func TestRunBelowOptionsBelow(t *testing.T) {
	stages, err := stagePlans(belowPlan(t))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := stages[0].LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	full, err := replay.Run(prog, stages[0], core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	used := full.Report().DeviceUsed
	for _, c := range []struct {
		below int64
		want  bool // a replay
	}{{0, false}, {used / 2, false}, {used, false}, {used + 1, true}, {math.MaxInt64, true}} {
		var b atomic.Int64
		b.Store(c.below)
		r, err := replay.RunBelow(prog, stages[0], core.Options{Below: &b}, math.MaxInt64-1)
		if err != nil {
			t.Fatal(err)
		}
		if (r != nil) != c.want {
			t.Errorf("Below %d (the step uses %d): replay %v, want %v", c.below, used, r != nil, c.want)
		}
		if r != nil && r.Report().DeviceUsed != used {
			t.Errorf("Below %d: device %d, Run: %d", c.below, r.Report().DeviceUsed, used)
		}
	}
}
