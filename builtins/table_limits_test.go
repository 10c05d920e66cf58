package builtins

import "testing"

// table_steps refuses series longer than maxTableSteps: a list of 10^8
// steps replayed for minutes.
func TestTableStepsLimit(t *testing.T) {
	prelude := `
p = train(model("m", embedding(100, 16), residual(table("t", rows = 100, dim = 16, grad = "sparse")), vocab = 100), batch = 1, seq = 8)
`
	runPreludeCases(t, prelude, []evalCase{
		{expr: `table_steps(p, [5] * 10001)`, err: "table_steps: rows_per_step has 10001 steps, more than 10000"},
		{expr: `len(table_steps(p, [5] * 3).steps)`, want: "3"},
	})
}
