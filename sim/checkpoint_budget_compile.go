package sim

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// A bytes budget under torch.compile: checkpoint(budget=70 * GiB) with
// train(compile=...) is met through the partitioner's own knob, the
// fraction torch calls activation_memory_budget (core's
// partition_budget.go). The step's device memory is not monotone in that
// fraction: what the graphs save grows with it, but the peak may lie
// elsewhere (the optimizer step) and the allocator's segments move with
// every change (Llama-2-7B, pure bf16, compiled: 64.6, 64.8, 64.5 and
// 68.2 GiB at 0, 0.3, 0.5 and 1), so no bisection can be trusted. The
// solver replays a grid of fractions instead, and picks the fastest step
// that fits; every fraction it reports on was replayed.

// budgetGrid: the fractions tried are k / budgetGrid, k = 0 .. budgetGrid.
const budgetGrid = 20

// solveCompileBudget resolves a bytes budget of a compiled plan into the
// fraction the partitioners work to; the note says what it chose.
func solveCompileBudget(plan *core.Plan, opts core.Options) (*core.Plan, []string, error) {
	limit := plan.Checkpoint.Budget.Bytes
	at := func(f float64) *core.Plan {
		q := *plan
		q.Checkpoint = core.Checkpoint{Mode: "budget", Budget: core.Budget{Fraction: f}}
		return &q
	}
	best, least := -1.0, 0.0 // the fastest fraction that fits; the one of least memory
	var bestStep float64
	var leastUsed int64
	for k := budgetGrid; k >= 0; k-- { // largest first: of equal steps, the one that recomputes least
		f := float64(k) / budgetGrid
		rep, err := Evaluate(at(f), opts)
		if err != nil {
			return nil, nil, err
		}
		if rep.Fits && rep.DeviceUsed <= limit && (best < 0 || rep.Time.StepSeconds < bestStep) {
			best, bestStep = f, rep.Time.StepSeconds
		}
		if k == budgetGrid || rep.DeviceUsed < leastUsed {
			least, leastUsed = f, rep.DeviceUsed
		}
	}
	grid := fmt.Sprintf("the fractions 0, %g, ..., 1", 1.0/budgetGrid)
	if best < 0 {
		return at(least), []string{fmt.Sprintf("%s under compile: none of %s fits %s; budget=%g, the least memory of them, uses %s",
			plan.Checkpoint, grid, units.FormatBytes(limit), least, units.FormatBytes(leastUsed))}, nil
	}
	return at(best), []string{fmt.Sprintf("%s under compile chose checkpoint(budget=%g), the partitioners' activation_memory_budget: the fastest step of %s whose replay fits (each was replayed: the step's memory is not monotone in the fraction)",
		plan.Checkpoint, best, grid)}, nil
}
