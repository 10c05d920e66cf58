package host

import (
	"errors"
	"strings"

	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// ChartSpec is the chart of a table that emit(t, x=, y=, by=, pareto=)
// asks `memsh plot` to draw.
type ChartSpec struct {
	X, Y string // numeric columns on the axes
	By   string // a column whose values split the rows into series; "" for none
	// Pareto highlights the front of X and Y: the rows t.pareto(X, Y)
	// returns (lower is better, except for mfu, hfu, tokens_per_s,
	// headroom and fits).
	Pareto bool
}

// Emitted is a value a script hands to its host: an argument of emit(),
// or a result of main().
type Emitted struct {
	Value starlark.Value
	Label string          // emit(x, label="...")
	At    syntax.Position // the emit() call, or main()'s definition
	// Chart is the chart of an emitted table (emit(t, x=, y=, by=,
	// pareto=), with defaults); nil for other values, and for a table
	// with no two numeric columns.
	Chart *ChartSpec
}

// encodeJSON is json.encode(v).
func EncodeJSON(thread *starlark.Thread, v starlark.Value) (string, error) {
	enc := json.Module.Members["encode"]
	out, err := starlark.Call(thread, enc, starlark.Tuple{v}, nil)
	if err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return "", errors.New(strings.TrimPrefix(ee.Msg, "json.encode: "))
		}
		return "", err
	}
	return string(out.(starlark.String)), nil
}
