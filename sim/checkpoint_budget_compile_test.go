package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// compiledBudgetPlan is budgetPlan (Llama-2-7B, pure bf16, 4096 tokens,
// A100-80GB) with its blocks and loss compiled.
func compiledBudgetPlan(b core.Budget) *core.Plan {
	p := budgetPlan(b)
	p.Compile = core.Compile{Blocks: true, Loss: true}
	return p
}

// TestBudgetFollowsTheStack: one budget, two mechanisms. In eager the
// solver picks a policy per block (the notes say which); under compile no
// block is checkpointed and the partitioners work to the fraction, saving
// at most what they save on their own, and only the inputs at 0.
func TestBudgetFollowsTheStack(t *testing.T) {
	eager, err := Evaluate(budgetPlan(core.Budget{Fraction: 0.5}), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(eager.Notes) == 0 || !strings.Contains(eager.Notes[0], "chose checkpoint(blocks: ") {
		t.Errorf("eager budget: notes %q, want the per-block choice", eager.Notes)
	}
	saved, recompute := map[float64]int64{}, map[float64]float64{}
	for _, f := range []float64{0, 0.5, 1} {
		rep, err := Evaluate(compiledBudgetPlan(core.Budget{Fraction: f}), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range rep.Notes {
			if strings.Contains(n, "chose") {
				t.Errorf("compiled budget %g: a fraction needs no solver, but the notes say %q", f, n)
			}
		}
		saved[f], recompute[f] = rep.SavedActivations, rep.FLOPs.Recompute
	}
	plain := compiledBudgetPlan(core.Budget{})
	plain.Checkpoint = core.Checkpoint{Mode: "none"}
	rep, err := Evaluate(plain, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if saved[1] != rep.SavedActivations || recompute[1] != rep.FLOPs.Recompute {
		t.Errorf("budget 1 saves %d B and recomputes %g FLOPs, compile on its own %d B and %g", saved[1], recompute[1], rep.SavedActivations, rep.FLOPs.Recompute)
	}
	if !(saved[0] < saved[0.5] && saved[0.5] < saved[1]) {
		t.Errorf("saved at budgets 0, 0.5, 1: %d, %d, %d B; want increasing", saved[0], saved[0.5], saved[1])
	}
	if !(recompute[0] > recompute[0.5] && recompute[0.5] > recompute[1]) {
		t.Errorf("recomputed at budgets 0, 0.5, 1: %g, %g, %g FLOPs; want decreasing", recompute[0], recompute[0.5], recompute[1])
	}
}

// TestCompiledBudgetBytes: a bytes budget under compile is met by the
// fastest fraction of the grid whose replay fits, checked against every
// fraction of the grid; above what compile needs on its own it is 1, and
// below what any fraction needs it is the least memory, said so.
func TestCompiledBudgetBytes(t *testing.T) {
	type point struct {
		used int64
		step float64
		fits bool
	}
	grid := make([]point, budgetGrid+1)
	for k := range grid {
		rep, err := Evaluate(compiledBudgetPlan(core.Budget{Fraction: float64(k) / budgetGrid}), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		grid[k] = point{rep.DeviceUsed, rep.Time.StepSeconds, rep.Fits}
	}
	lowest, highest := grid[0].used, grid[0].used
	for _, g := range grid {
		lowest, highest = min(lowest, g.used), max(highest, g.used)
	}
	for _, c := range []struct {
		name  string
		limit int64
	}{
		{"between", (lowest + highest) / 2},
		{"above all", highest + 1<<30},
		{"below all", lowest - 1<<30},
	} {
		q, notes, err := solveCompileBudget(compiledBudgetPlan(core.Budget{Bytes: c.limit}), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f := q.Checkpoint.Budget.Fraction
		k := int(f*budgetGrid + 0.5)
		if q.Checkpoint.Mode != "budget" || q.Checkpoint.Budget.Bytes != 0 || float64(k)/budgetGrid != f {
			t.Fatalf("%s: resolved to %s, want a fraction of the grid", c.name, q.Checkpoint)
		}
		got := grid[k]
		switch c.name {
		case "below all":
			if got.used != lowest || !strings.Contains(notes[0], "none of the fractions 0, 0.05, ..., 1 fits") {
				t.Errorf("%s: budget=%g uses %d B (least %d B); notes %q", c.name, f, got.used, lowest, notes)
			}
			continue
		case "above all":
			if f != 1 {
				t.Errorf("%s: budget=%g, want 1 (compile on its own fits)", c.name, f)
			}
		}
		if !got.fits || got.used > c.limit {
			t.Errorf("%s: budget=%g uses %d B, over %d B", c.name, f, got.used, c.limit)
		}
		for j, g := range grid {
			if g.fits && g.used <= c.limit && g.step < got.step {
				t.Errorf("%s: budget=%g (step %g s) chosen, but %g fits with step %g s", c.name, f, got.step, float64(j)/budgetGrid, g.step)
			}
		}
		if !strings.Contains(notes[0], "whose replay fits") {
			t.Errorf("%s: notes %q", c.name, notes)
		}
	}
}
