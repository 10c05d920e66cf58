package tables

import (
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/plot"
	"go.starlark.net/starlark"
)

// defaultY are the columns drawn on the y axis when emit names none, in
// order of preference.
var defaultY = []string{"peak_allocated", "step_time", "device_used"}

// chartSpec checks emit's chart arguments (nil or None when not given)
// against t and fills in the defaults: x is the first numeric column of
// the table's leading key columns (the swept axes, the layout), y the
// first of peak_allocated, step_time and device_used the table has. It
// returns nil when no argument was given and t has no two numeric
// columns to draw.
func (t *ResultTable) ChartSpec(x, y, by starlark.Value, pareto bool) (*host.ChartSpec, error) {
	given := !IsNone(x) || !IsNone(y)
	if !given && IsNone(by) && !pareto && t.chart != nil {
		c := *t.chart
		return &c, nil
	}
	spec := &host.ChartSpec{Pareto: pareto}
	if !IsNone(x) {
		j, err := t.numericColumn("x", x)
		if err != nil {
			return nil, err
		}
		spec.X = t.columns[j]
	}
	if !IsNone(y) {
		j, err := t.numericColumn("y", y)
		if err != nil {
			return nil, err
		}
		spec.Y = t.columns[j]
	}
	if !IsNone(by) {
		j, err := t.column("by", by)
		if err != nil {
			return nil, err
		}
		if !t.shownColumn(j) {
			return nil, fmt.Errorf("by column %q holds %s values: choose a column of strings, numbers or bools", t.columns[j], t.cellType(j))
		}
		spec.By = t.columns[j]
	}
	if spec.X == "" {
		spec.X = t.defaultX(spec.Y)
	}
	if spec.Y == "" {
		spec.Y = t.defaultY(spec.X)
	}
	if spec.X == "" || spec.Y == "" {
		if given || !IsNone(by) || pareto {
			missing := "y"
			if spec.X == "" {
				missing = "x"
			}
			return nil, fmt.Errorf("table has no numeric column to put on %s (numeric columns: %s): name both, emit(t, x=..., y=...)",
				missing, strings.Join(t.numericColumns(), ", "))
		}
		return nil, nil
	}
	return spec, nil
}

func IsNone(v starlark.Value) bool { return v == nil || v == starlark.None }

// numericColumn checks that v names a column of numbers (ints or floats;
// None where a row has no value).
func (t *ResultTable) numericColumn(what string, v starlark.Value) (int, error) {
	j, err := t.column(what, v)
	if err != nil {
		return 0, err
	}
	if !t.isNumeric(j) {
		return 0, host.WithHint(fmt.Errorf("%s column %q holds %s values, not numbers", what, t.columns[j], t.cellType(j)),
			"numeric columns: "+strings.Join(t.numericColumns(), ", "))
	}
	return j, nil
}

// isNumeric says whether column j holds ints and floats (and None), at
// least one of them.
func (t *ResultTable) isNumeric(j int) bool {
	seen := false
	for _, r := range t.rows {
		switch r[j].(type) {
		case starlark.Int, starlark.Float:
			seen = true
		case starlark.NoneType:
		default:
			return false
		}
	}
	return seen
}

// cellType is the type of column j's first cell that is not None.
func (t *ResultTable) cellType(j int) string {
	for _, r := range t.rows {
		if r[j] != starlark.None {
			return r[j].Type()
		}
	}
	return "None"
}

func (t *ResultTable) numericColumns() []string {
	var out []string
	for j, c := range t.columns {
		if t.isNumeric(j) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// keyColumns are the leading columns that say which row is which (a
// sweep's axes, a search's layout): those before the first figure, a
// column with a unit or one of fits, tokens_per_s, error, plan, report.
func (t *ResultTable) keyColumns() []int {
	var out []int
	for j, c := range t.columns {
		switch {
		case t.units[j] != "", c == "fits", c == "tokens_per_s", c == "error", c == "plan", c == "report":
			return out
		}
		out = append(out, j)
	}
	return out
}

func (t *ResultTable) defaultX(y string) string {
	for _, j := range t.keyColumns() {
		if t.isNumeric(j) && t.columns[j] != y {
			return t.columns[j]
		}
	}
	for j, c := range t.columns {
		if t.isNumeric(j) && c != y {
			return c
		}
	}
	return ""
}

func (t *ResultTable) defaultY(x string) string {
	for _, c := range defaultY {
		if j := t.ColumnIndex(c); j >= 0 && c != x && t.isNumeric(j) {
			return c
		}
	}
	for j, c := range t.columns {
		if t.isNumeric(j) && c != x {
			return c
		}
	}
	return ""
}

// Chart is the plot data of spec over t's rows: a point per row with
// numbers in both columns, in series by spec.By, crossed where fits is
// False, on the front where t.pareto(spec.X, spec.Y) keeps the row,
// joined by lines when x is a key column (a swept axis).
func (t *ResultTable) Chart(spec host.ChartSpec) (*plot.TableChart, error) {
	jx, jy := t.ColumnIndex(spec.X), t.ColumnIndex(spec.Y)
	if jx < 0 || jy < 0 {
		return nil, fmt.Errorf("internal error: chart of columns %q and %q, which the table lacks", spec.X, spec.Y)
	}
	upX, _ := t.maximizes(jx, nil)
	upY, _ := t.maximizes(jy, nil)
	tc := &plot.TableChart{
		X:      plot.Axis{Name: spec.X, Unit: t.units[jx], Higher: upX},
		Y:      plot.Axis{Name: spec.Y, Unit: t.units[jy], Higher: upY},
		By:     spec.By,
		Pareto: spec.Pareto,
	}
	for _, j := range t.keyColumns() {
		tc.Lines = tc.Lines || j == jx // x was swept: join the points along it
	}
	jb := t.ColumnIndex(spec.By)
	jf := t.ColumnIndex("fits")
	if jf >= 0 {
		for _, r := range t.rows {
			if _, ok := r[jf].(starlark.Bool); ok {
				tc.Fits = true
			}
		}
	}
	front := map[int]bool{}
	if spec.Pareto {
		for _, i := range ParetoIndexes(t.rows, jx, jy, upX, upY) {
			front[i] = true
		}
	}
	// Name a row by the key columns that vary and are not on the chart.
	var keyCols []int
	for _, j := range t.keyColumns() {
		if j != jx && j != jy && j != jb && t.shownColumn(j) && t.varies(j) {
			keyCols = append(keyCols, j)
		}
	}
	series := map[string]int{}
	for i, r := range t.rows {
		x, okx := finiteNumber(r[jx])
		y, oky := finiteNumber(r[jy])
		if !okx || !oky {
			tc.Skipped++
			continue
		}
		name := ""
		if jb >= 0 {
			name = FormatCell(r[jb], t.units[jb])
		}
		k, ok := series[name]
		if !ok {
			k = len(tc.Series)
			series[name] = k
			tc.Series = append(tc.Series, plot.Series{Name: name})
		}
		p := plot.TablePoint{X: x, Y: y, Front: front[i]}
		for _, j := range keyCols {
			p.Keys = append(p.Keys, t.columns[j]+"="+FormatCell(r[j], t.units[j]))
		}
		if jf >= 0 {
			p.DoesNotFit = r[jf] == starlark.False
		}
		tc.Series[k].Points = append(tc.Series[k].Points, p)
	}
	return tc, nil
}

// finiteNumber reads an int or float cell (not a bool) that is finite.
func finiteNumber(v starlark.Value) (float64, bool) {
	switch v.(type) {
	case starlark.Int, starlark.Float:
		f, ok := number(v)
		return f, ok && !math.IsInf(f, 0)
	}
	return 0, false
}

// varies says whether column j holds more than one value.
func (t *ResultTable) varies(j int) bool {
	for _, r := range t.rows[min(1, len(t.rows)):] {
		if eq, err := starlark.Equal(r[j], t.rows[0][j]); err != nil || !eq {
			return true
		}
	}
	return false
}
