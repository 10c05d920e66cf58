package sim

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestParetoFrontExact: on random small instances (up to 6 blocks of 5
// options, ties included), the front the solver builds holds, for every
// budget, the least cost a brute force over all choices finds, and no
// point of it is beaten by any choice.
func TestParetoFrontExact(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.Intn(6)
		c := &blockCosts{bytes: make([][]int64, n), secs: make([][]float64, n)}
		for b := range c.bytes {
			c.bytes[b], c.secs[b] = make([]int64, 5), make([]float64, 5)
			for o := range c.bytes[b] {
				c.bytes[b][o] = int64(r.Intn(20))
				c.secs[b][o] = float64(r.Intn(20))
			}
		}
		front := paretoFront(c)
		// Every choice, by brute force.
		type total struct {
			bytes int64
			secs  float64
		}
		var all []total
		choice := make([]int, n)
		for {
			var tt total
			for b, o := range choice {
				tt.bytes += c.bytes[b][o]
				tt.secs += c.secs[b][o]
			}
			all = append(all, tt)
			k := 0
			for k < n {
				choice[k]++
				if choice[k] < 5 {
					break
				}
				choice[k] = 0
				k++
			}
			if k == n {
				break
			}
		}
		for _, p := range front {
			var got total
			for b, o := range p.choice {
				got.bytes += c.bytes[b][o]
				got.secs += c.secs[b][o]
			}
			if got.bytes != p.bytes || got.secs != p.secs {
				t.Fatalf("trial %d: point %+v sums to %+v", trial, p, got)
			}
			for _, a := range all {
				if (a.bytes < p.bytes && a.secs <= p.secs) || (a.bytes <= p.bytes && a.secs < p.secs) {
					t.Fatalf("trial %d: front point (%d, %g) is beaten by (%d, %g)", trial, p.bytes, p.secs, a.bytes, a.secs)
				}
			}
		}
		for limit := int64(0); limit <= int64(20*n); limit++ {
			best, found := 0.0, false
			for _, a := range all {
				if a.bytes <= limit && (!found || a.secs < best) {
					best, found = a.secs, true
				}
			}
			got, gotFound := 0.0, false
			for _, p := range front {
				if p.bytes <= limit && (!gotFound || p.secs < got) {
					got, gotFound = p.secs, true
				}
			}
			if found != gotFound || best != got {
				t.Fatalf("trial %d, budget %d: front %g (%v), brute force %g (%v)", trial, limit, got, gotFound, best, found)
			}
		}
	}
}

// TestBudgetWeightsAddUp: what the solver counts per block adds up to what
// the replay holds for backward, to the byte, for any mix of options.
func TestBudgetWeightsAddUp(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, impl := range []string{"flash", "eager"} {
		p := testmodels.LlamaPlan(testmodels.Llama(512, 6, 8, 8, 1408, 1000, impl), 2, 256, "bf16-mixed", "none", "A100-80GB")
		c, err := measureBlocks(p)
		if err != nil {
			t.Fatal(err)
		}
		outside := outsideBytes(t, p, c)
		for trial := 0; trial < 10; trial++ {
			choice := make([]int, len(c.bytes))
			var want int64
			for b := range choice {
				choice[b] = r.Intn(len(blockOptions))
				want += c.bytes[b][choice[b]]
			}
			rep, err := Evaluate(withChoice(p, choice), core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.SavedActivations + rep.SavedWeightCopies - outside; got != want {
				t.Errorf("%s, choice %v: the blocks hold %d bytes for backward, the solver counts %d", impl, choice, got, want)
			}
		}
	}
}

// outsideBytes is what the plan holds for backward outside its blocks
// (embedding, head, loss), the same under every option.
func outsideBytes(t *testing.T, p *core.Plan, c *blockCosts) int64 {
	t.Helper()
	rep, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var blocks int64
	for _, row := range c.bytes {
		blocks += row[noneOption]
	}
	return rep.SavedActivations + rep.SavedWeightCopies - blocks
}

// budgetPlan is Llama-2-7B, pure bf16, sequences of 4096 on an A100-80GB:
// 75 GiB without checkpointing, 65 GiB with full.
func budgetPlan(b core.Budget) *core.Plan {
	p := testmodels.LlamaPlan(testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash"), 1, 4096, "bf16", "none", "A100-80GB")
	p.Checkpoint = core.Checkpoint{Mode: "budget", Budget: b}
	return p
}

// TestBudgetFraction: 0 is full checkpointing, 1 none, and in between the
// blocks keep at most the mix of the two while the recompute falls as the
// budget grows.
func TestBudgetFraction(t *testing.T) {
	eval := func(p *core.Plan) *replayReport {
		t.Helper()
		rep, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return &replayReport{saved: rep.SavedActivations + rep.SavedWeightCopies, used: rep.DeviceUsed, step: rep.Time.StepSeconds, notes: rep.Notes}
	}
	with := func(ck string) *replayReport {
		p := budgetPlan(core.Budget{})
		p.Checkpoint, _ = core.ParseCheckpoint(ck)
		return eval(p)
	}
	none, full := with("none"), with("full")
	last := full.step + 1
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		r := eval(budgetPlan(core.Budget{Fraction: f}))
		limit := full.saved + int64(f*float64(none.saved-full.saved))
		if r.saved > limit {
			t.Errorf("budget %g: %d bytes saved, over %d", f, r.saved, limit)
		}
		if r.step >= last {
			t.Errorf("budget %g: step %g s, no faster than the smaller budget's %g s", f, r.step, last)
		}
		last = r.step
		if !strings.Contains(r.notes[0], "the least on the exact Pareto front") {
			t.Errorf("budget %g: notes %q", f, r.notes)
		}
		switch f {
		case 0:
			if r.saved != full.saved || r.step != full.step {
				t.Errorf("budget 0 should be full checkpointing: %+v, full %+v", r, full)
			}
		case 1:
			if r.saved != none.saved || r.step != none.step {
				t.Errorf("budget 1 should be no checkpointing: %+v, none %+v", r, none)
			}
		}
	}
}

type replayReport struct {
	saved, used int64
	step        float64
	notes       []string
}

// TestBudgetBytes: a budget of 64 GiB on a plan that needs 67.7 without
// checkpointing (62.8 allocated at the peak): the choice fits, the next point of the front does not,
// and it recomputes less than full checkpointing.
func TestBudgetBytes(t *testing.T) {
	p := budgetPlan(core.Budget{Bytes: 64 << 30})
	rep, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Fits || rep.DeviceUsed > 64<<30 {
		t.Fatalf("used %d, fits %v", rep.DeviceUsed, rep.Fits)
	}
	full := budgetPlan(core.Budget{})
	full.Checkpoint, _ = core.ParseCheckpoint("full")
	fr, _ := Evaluate(full, core.Options{})
	if rep.Time.StepSeconds >= fr.Time.StepSeconds {
		t.Errorf("step %g s, full checkpointing %g s", rep.Time.StepSeconds, fr.Time.StepSeconds)
	}
	// The next point up the front does not fit the budget.
	c, err := measureBlocks(p)
	if err != nil {
		t.Fatal(err)
	}
	front := paretoFront(c)
	chosen := -1
	q, _, err := solveBudget(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, pt := range front {
		if withChoice(p, pt.choice).Checkpoint.String() == q.Checkpoint.String() {
			chosen = i
		}
	}
	if chosen < 0 || chosen+1 >= len(front) {
		t.Fatalf("chosen point %d of %d", chosen, len(front))
	}
	next, err := Evaluate(withChoice(p, front[chosen+1].choice), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if next.Fits && next.DeviceUsed <= 64<<30 {
		t.Errorf("the next point fits too: %d bytes", next.DeviceUsed)
	}
	t.Logf("%s: %s", q.Checkpoint, rep.Notes[0])
}

// TestBudgetErrors: budgets the solver cannot answer say why.
func TestBudgetErrors(t *testing.T) {
	pipe := budgetPlan(core.Budget{Fraction: 0.5})
	pipe.Parallel = core.Parallelism{PP: 2}
	flat := budgetPlan(core.Budget{Fraction: 0.5})
	flat.Model = testmodels.Llama(64, 1, 2, 2, 128, 100, "flash")
	flat.Model.Layers[1] = flat.Model.Layers[1].(*core.Repeat).Layer
	for _, c := range []struct {
		plan *core.Plan
		want string
	}{
		{budgetPlan(core.Budget{Fraction: 1.5}), "a fraction must be in [0, 1] (got 1.5)"},
		{budgetPlan(core.Budget{Bytes: -1}), "bytes must be positive"},
		{pipe, "checkpoint(budget=...) is solved for plans without pipeline stages"},
		{flat, `checkpoint(budget=...) chooses per repeated block, and model "llama" has none`},
	} {
		_, err := Evaluate(c.plan, core.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}
