package builtins

import (
	"math"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/tables"
	"go.starlark.net/starlark"
)

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

// Table cells past int64 print in float notation: int64(1e25) is
// undefined in Go and printed -9,223,372,036,854,775,808 for the
// tokens_per_s of a search over 2^62 GPUs.
func TestFormatCellBeyondInt64(t *testing.T) {
	cases := []struct {
		v    starlark.Value
		unit string
		want string
	}{
		{starlark.Float(1.3e25), "", "1.3e+25"},
		{starlark.Float(123456.4), "", "123,456"},
		{starlark.Float(math.Inf(1)), "", "+Inf"},
		{starlark.Float(2e19), host.UnitBytes, "2e+19"},
	}
	for _, c := range cases {
		if got := tables.FormatCell(c.v, c.unit); got != c.want {
			t.Errorf("formatCell(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

func TestSearchGPUCountOverflow(t *testing.T) {
	prelude := `m = model("m", embedding(100, 64), repeat(sequential(attention(64, 4), mlp(64, 128)), 4), vocab = 100)`
	runPreludeCases(t, prelude, []evalCase{
		{expr: `search(m, nodes = 1 << 40, gpus_per_node = 1 << 40, global_batch = 8, seq = 16)`,
			err: "search: nodes=1099511627776 x gpus_per_node=1099511627776 is more GPUs than memsh can count"},
	})
}
