package builtins

import "testing"

// The sweep's plan count is checked without overflow, and max= has a
// ceiling: four axes of 65,536 values are 2^64 plans, which wrapped to 0
// and made the sweep fail with "internal error in sweep: makeslice".
func TestSweepSizeLimits(t *testing.T) {
	prelude := `
p = train(model("m", linear(8, 8), loss = "mse"), batch = 1)
a = list(range(1, 65537))
`
	runPreludeCases(t, prelude, []evalCase{
		{expr: `sweep(p, max = 1000000, batch = a, grad_accum = a, dp = a, tp = a)`,
			err: "sweep: batch (65536) x grad_accum (65536) x dp (65536) x tp (65536) make more than 1000000 plans"},
		{expr: `sweep(p, batch = a)`, err: "make more than 10000 plans"},
		{expr: `sweep(p, max = 1 << 62, batch = a, grad_accum = a, dp = a, tp = a)`,
			err: "sweep: max must be in 1..1000000 (got 4611686018427387904)"},
		{expr: `sweep(p, max = 0, batch = [1])`, err: "sweep: max must be in 1..1000000 (got 0)"},
		{expr: `len(sweep(p, max = 2, batch = [1, 2]).rows)`, want: "2"},
	})
}
