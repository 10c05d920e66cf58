package tables

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/plot"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The methods of a result table: filter, best, sort, pareto, as_dicts and
// render, and the column lookups and conditions they share.

var tableMethods = map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
	"as_dicts": tableAsDicts,
	"best":     tableBest,
	"csv":      tableCSV,
	"filter":   tableFilter,
	"pareto":   tablePareto,
	"plot":     tablePlot,
	"render":   tableRender,
	"sort":     tableSort,
}

func receiver(b *starlark.Builtin) *ResultTable { return b.Receiver().(*ResultTable) }

func tableAsDicts(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	t := receiver(b)
	out := make([]starlark.Value, len(t.rows))
	for i := range t.rows {
		out[i] = t.row(i, true)
	}
	return host.FrozenList(out), nil
}

func tableRender(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.String(receiver(b).RenderText(false)), nil
}

// column checks a column name argument.
func (t *ResultTable) column(what string, v starlark.Value) (int, error) {
	s, ok := v.(starlark.String)
	if !ok {
		return 0, fmt.Errorf("%s must be a column name (got %s)", what, v.Type())
	}
	j := t.ColumnIndex(string(s))
	if j < 0 {
		return 0, host.WithHint(fmt.Errorf("table has no column %q (columns: %s)", string(s), strings.Join(t.columns, ", ")), host.DidYouMean(string(s), t.columns))
	}
	return j, nil
}

// higherIsBetter names the figures best() and pareto() maximize unless
// told otherwise.
var higherIsBetter = map[string]bool{"mfu": true, "hfu": true, "tokens_per_s": true, "headroom": true, "fits": true}

// number reads a cell as a number for ordering; ok is false for None and
// non-numbers.
func number(v starlark.Value) (float64, bool) {
	switch x := v.(type) {
	case starlark.Int:
		return float64(x.Float()), true
	case starlark.Float:
		return float64(x), !math.IsNaN(float64(x))
	case starlark.Bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// where applies a filter: a function row -> bool, or a dict of column ->
// value equalities.
func (t *ResultTable) where(thread *starlark.Thread, cond starlark.Value) ([][]starlark.Value, error) {
	if cond == nil || cond == starlark.None {
		return t.rows, nil
	}
	var keep func(i int) (bool, error)
	switch c := cond.(type) {
	case *starlark.Dict:
		type eq struct {
			j int
			v starlark.Value
		}
		var eqs []eq
		for _, item := range c.Items() {
			j, err := t.column("where key", item[0])
			if err != nil {
				return nil, err
			}
			eqs = append(eqs, eq{j, item[1]})
		}
		keep = func(i int) (bool, error) {
			for _, e := range eqs {
				ok, err := starlark.Equal(t.rows[i][e.j], e.v)
				if err != nil || !ok {
					return false, err
				}
			}
			return true, nil
		}
	case starlark.Callable:
		keep = func(i int) (bool, error) {
			v, err := starlark.Call(thread, c, starlark.Tuple{t.row(i, false)}, nil)
			if err != nil {
				return false, err
			}
			return bool(v.Truth()), nil
		}
	default:
		return nil, fmt.Errorf("where must be a function of a row or a dict of column values (got %s)", cond.Type())
	}
	var out [][]starlark.Value
	for i := range t.rows {
		ok, err := keep(i)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t.rows[i])
		}
	}
	return out, nil
}

func tableFilter(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var fn starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "fn", &fn); err != nil {
		return nil, err
	}
	t := receiver(b)
	rows, err := t.where(thread, fn)
	if err != nil {
		return nil, err
	}
	return t.derive(rows), nil
}

// maximizes decides the direction of column j: maximize (a bool, or a
// list of column names), else higherIsBetter.
func (t *ResultTable) maximizes(j int, maximize starlark.Value) (bool, error) {
	switch m := maximize.(type) {
	case nil, starlark.NoneType:
		return higherIsBetter[t.columns[j]], nil
	case starlark.Bool:
		return bool(m), nil
	case *starlark.List, starlark.Tuple:
		it := starlark.Iterate(m)
		defer it.Done()
		var x starlark.Value
		for it.Next(&x) {
			k, err := t.column("maximize", x)
			if err != nil {
				return false, err
			}
			if k == j {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("maximize must be a bool or a list of column names (got %s)", maximize.Type())
}

func tableBest(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var by, where, maximize starlark.Value = starlark.String("step_time"), nil, nil
	fits := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "by?", &by, "where?", &where, "maximize?", &maximize, "fits?", &fits); err != nil {
		return nil, err
	}
	t := receiver(b)
	j, err := t.column("by", by)
	if err != nil {
		return nil, err
	}
	up, err := t.maximizes(j, maximize)
	if err != nil {
		return nil, err
	}
	rows, err := t.where(thread, where)
	if err != nil {
		return nil, err
	}
	if jf := t.ColumnIndex("fits"); fits && jf >= 0 && len(rows) > 0 {
		var fitting [][]starlark.Value
		for _, r := range rows {
			if r[jf] == starlark.True {
				fitting = append(fitting, r)
			}
		}
		if len(fitting) == 0 {
			return nil, t.noneFits(rows)
		}
		rows = fitting
	}
	best := -1
	var bestV float64
	for i, r := range rows {
		v, ok := number(r[j])
		if !ok {
			continue
		}
		if best < 0 || (up && v > bestV) || (!up && v < bestV) {
			best, bestV = i, v
		}
	}
	if best < 0 {
		return starlark.None, t.notNumbers(rows, j)
	}
	return t.derive(rows[best:best+1]).row(0, false), nil
}

// notNumbers is best()'s error when no row of rows has a number in
// column j but some hold another kind of value (best(by="sharding") was
// None, as if the table were empty): nil when every cell is None (a row
// that failed) or NaN.
func (t *ResultTable) notNumbers(rows [][]starlark.Value, j int) error {
	for _, r := range rows {
		switch r[j].(type) {
		case starlark.NoneType, starlark.Float:
			continue
		}
		return host.WithHint(fmt.Errorf("best: column %q holds %s values, not numbers", t.columns[j], r[j].Type()),
			"by names a numeric column (step_time, device_used, mfu, ...); t.sort(by) orders by any column")
	}
	return nil
}

// noneFits is best()'s error when no row of rows fits: it names the row
// nearest to fitting (the largest headroom) and how short it is.
func (t *ResultTable) noneFits(rows [][]starlark.Value) error {
	msg := fmt.Sprintf("best: none of the %d rows fits", len(rows))
	if jh := t.ColumnIndex("headroom"); jh >= 0 {
		nearest, most := -1, 0.0
		for i, r := range rows {
			if h, ok := number(r[jh]); ok && (nearest < 0 || h > most) {
				nearest, most = i, h
			}
		}
		if nearest >= 0 {
			var keys []string
			for _, k := range t.keyColumns() {
				if t.varies(k) {
					keys = append(keys, t.columns[k]+"="+FormatCell(rows[nearest][k], t.units[k]))
				}
			}
			nearest := "the nearest"
			if len(keys) > 0 {
				nearest += " (" + strings.Join(keys, ", ") + ")"
			}
			if most < 0 {
				nearest += " is " + FormatCell(starlark.MakeInt64(int64(-most)), host.UnitBytes) + " short"
			} else {
				nearest += " runs out of memory at an allocation"
			}
			msg += "; " + nearest
		}
	}
	return host.WithHint(errors.New(msg), "best(fits=False) ranks every row, fitting or not; "+
		"t.filter(lambda r: r[\"fits\"]).best() is None when none fits")
}

func tableSort(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var by starlark.Value
	reverse := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "by", &by, "reverse?", &reverse); err != nil {
		return nil, err
	}
	t := receiver(b)
	j, err := t.column("by", by)
	if err != nil {
		return nil, err
	}
	rows := append([][]starlark.Value(nil), t.rows...)
	var cmpErr error
	sort.SliceStable(rows, func(a, c int) bool {
		x, y := rows[a][j], rows[c][j]
		// None sorts last either way.
		if x == starlark.None || y == starlark.None {
			return y == starlark.None && x != starlark.None
		}
		if reverse {
			x, y = y, x
		}
		lt, err := starlark.Compare(syntax.LT, x, y)
		if err != nil && cmpErr == nil {
			cmpErr = fmt.Errorf("sort by %s: %v", t.columns[j], err)
		}
		return lt
	})
	if cmpErr != nil {
		return nil, cmpErr
	}
	return t.derive(rows), nil
}

func tablePareto(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var xv, yv, maximize starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "x", &xv, "y", &yv, "maximize?", &maximize); err != nil {
		return nil, err
	}
	t := receiver(b)
	jx, err := t.column("x", xv)
	if err != nil {
		return nil, err
	}
	jy, err := t.column("y", yv)
	if err != nil {
		return nil, err
	}
	upX, err := t.maximizes(jx, maximize)
	if err != nil {
		return nil, err
	}
	upY, err := t.maximizes(jy, maximize)
	if err != nil {
		return nil, err
	}
	var rows [][]starlark.Value
	for _, i := range ParetoIndexes(t.rows, jx, jy, upX, upY) {
		rows = append(rows, t.rows[i])
	}
	return t.derive(rows), nil
}

// tablePlot is t.plot(path, x=None, y=None, by=None, pareto=False): the
// chart emit(t, ...) hands memsh plot, written as an SVG file next to the
// script (host.WriteScriptFile).
func tablePlot(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var x, y, by starlark.Value = starlark.None, starlark.None, starlark.None
	pareto := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "x?", &x, "y?", &y, "by?", &by, "pareto?", &pareto); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".svg") {
		return nil, host.WithHint(fmt.Errorf("t.plot writes an SVG file: %q does not end in .svg", path), "e.g. t.plot(\"front.svg\"); memsh plot draws emitted tables as HTML")
	}
	t := receiver(b)
	spec, err := t.ChartSpec(x, y, by, pareto)
	if err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, fmt.Errorf("table has no two numeric columns to draw: name them, t.plot(path, x=..., y=...)")
	}
	tc, err := t.Chart(*spec)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := plot.WriteSVG(&buf, []plot.Chart{{Title: t.title, Table: tc}}); err != nil {
		return nil, err
	}
	if err := host.WriteScriptFile(thread, path, buf.Bytes()); err != nil {
		return nil, err
	}
	return starlark.None, nil
}
