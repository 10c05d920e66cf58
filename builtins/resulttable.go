package builtins

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// ResultTable is the Starlark value of a table of results (type "table"),
// from sweep() and search(): rows of named cells, one column per axis or
// figure. The Go API for other packages (plots, JSON) is Columns, Rows,
// Column, Units, Title and Notes; a table never changes after it is made
// (sort, filter and pareto return new tables).
//
// In Starlark: t.rows (a list of dicts, column -> value), t.columns,
// t.best(by=, where=), t.pareto(x, y), t.sort(by, reverse=False),
// t.filter(fn), t.render(), t.as_dicts(), len(t), t[i] (a row), for row
// in t; print(t) shows the aligned table.
type ResultTable struct {
	title   string
	columns []string
	units   []string // per column: UnitBytes, UnitSeconds, UnitFraction, or ""
	rows    [][]starlark.Value
	notes   []string
	color   bool
}

// Column units, for rendering and for plots' axis labels.
const (
	UnitBytes    = "bytes"    // an int of bytes
	UnitSeconds  = "seconds"  // a float of seconds
	UnitFraction = "fraction" // a float from 0 to 1, shown as a percentage
)

var (
	_ starlark.HasAttrs  = (*ResultTable)(nil)
	_ starlark.Indexable = (*ResultTable)(nil)
	_ starlark.Iterable  = (*ResultTable)(nil)
	_ Renderer           = (*ResultTable)(nil)
)

// NewResultTable makes a table. rows[i][j] is the cell of column j in row
// i (None where a row has no value); units gives each column's unit ("" =
// none) and may be nil. The slices are kept: do not modify them after.
func NewResultTable(title string, columns, units []string, rows [][]starlark.Value, notes []string) *ResultTable {
	if units == nil {
		units = make([]string, len(columns))
	}
	for _, r := range rows {
		for _, v := range r {
			v.Freeze()
		}
	}
	return &ResultTable{title: title, columns: columns, units: units, rows: rows, notes: notes}
}

// Title is the table's one-line heading ("" when none).
func (t *ResultTable) Title() string { return t.title }

// Columns are the column names, in order.
func (t *ResultTable) Columns() []string { return t.columns }

// Units are the columns' units (UnitBytes, UnitSeconds, UnitFraction or "").
func (t *ResultTable) Units() []string { return t.units }

// Rows are the cells, row by row, in Columns order (shared: do not modify).
func (t *ResultTable) Rows() [][]starlark.Value { return t.rows }

// Notes are remarks printed under the table (how it was made).
func (t *ResultTable) Notes() []string { return t.notes }

// Column returns the cells of the named column.
func (t *ResultTable) Column(name string) ([]starlark.Value, bool) {
	j := t.index(name)
	if j < 0 {
		return nil, false
	}
	out := make([]starlark.Value, len(t.rows))
	for i, r := range t.rows {
		out[i] = r[j]
	}
	return out, true
}

func (t *ResultTable) index(name string) int {
	for j, c := range t.columns {
		if c == name {
			return j
		}
	}
	return -1
}

// derive is a table with t's columns and the given rows.
func (t *ResultTable) derive(rows [][]starlark.Value) *ResultTable {
	return &ResultTable{title: t.title, columns: t.columns, units: t.units, rows: rows, notes: t.notes, color: t.color}
}

func (t *ResultTable) Type() string         { return "table" }
func (t *ResultTable) Freeze()              {}
func (t *ResultTable) Truth() starlark.Bool { return len(t.rows) > 0 }
func (t *ResultTable) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: table")
}
func (t *ResultTable) Len() int { return len(t.rows) }

func (t *ResultTable) Index(i int) starlark.Value { return t.row(i, false) }

func (t *ResultTable) Iterate() starlark.Iterator { return &tableIter{t: t} }

type tableIter struct {
	t *ResultTable
	i int
}

func (it *tableIter) Next(p *starlark.Value) bool {
	if it.i >= len(it.t.rows) {
		return false
	}
	*p = it.t.row(it.i, false)
	it.i++
	return true
}
func (it *tableIter) Done() {}

// row is row i as a frozen dict; plain keeps only the plain columns.
func (t *ResultTable) row(i int, plain bool) *starlark.Dict {
	d := starlark.NewDict(len(t.columns))
	for j, c := range t.columns {
		if plain && !t.plainColumn(j) {
			continue
		}
		_ = d.SetKey(starlark.String(c), t.rows[i][j])
	}
	d.Freeze()
	return d
}

// plainColumn says whether column j holds only JSON-able cells (ints,
// floats, strings, bools, None): not plans or reports.
func (t *ResultTable) plainColumn(j int) bool {
	for _, r := range t.rows {
		if !isPlain(r[j]) {
			return false
		}
	}
	return true
}

func isPlain(v starlark.Value) bool {
	switch v.(type) {
	case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String:
		return true
	}
	return false
}

var tableAttrNames = []string{"as_dicts", "best", "columns", "filter", "notes", "pareto", "render", "rows", "sort", "title"}

func (t *ResultTable) AttrNames() []string { return tableAttrNames }

func (t *ResultTable) Attr(name string) (starlark.Value, error) {
	switch name {
	case "rows":
		out := make([]starlark.Value, len(t.rows))
		for i := range t.rows {
			out[i] = t.row(i, false)
		}
		return frozenList(out), nil
	case "columns":
		out := make([]starlark.Value, len(t.columns))
		for j, c := range t.columns {
			out[j] = starlark.String(c)
		}
		return frozenList(out), nil
	case "notes":
		out := make([]starlark.Value, len(t.notes))
		for j, n := range t.notes {
			out[j] = starlark.String(n)
		}
		return frozenList(out), nil
	case "title":
		return starlark.String(t.title), nil
	}
	fn, ok := tableMethods[name]
	if !ok {
		return nil, nil
	}
	return starlark.NewBuiltin(name, fn).BindReceiver(t), nil
}

var tableMethods = map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
	"as_dicts": tableAsDicts,
	"best":     tableBest,
	"filter":   tableFilter,
	"pareto":   tablePareto,
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
	return frozenList(out), nil
}

func tableRender(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.String(receiver(b).render(false)), nil
}

// column checks a column name argument.
func (t *ResultTable) column(what string, v starlark.Value) (int, error) {
	s, ok := v.(starlark.String)
	if !ok {
		return 0, fmt.Errorf("%s must be a column name (got %s)", what, v.Type())
	}
	j := t.index(string(s))
	if j < 0 {
		return 0, withHint(fmt.Errorf("table has no column %q (columns: %s)", string(s), strings.Join(t.columns, ", ")), didYouMean(string(s), t.columns))
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
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "by?", &by, "where?", &where, "maximize?", &maximize); err != nil {
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
		return starlark.None, nil
	}
	return t.derive(rows[best:best+1]).row(0, false), nil
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
	for _, i := range paretoIndexes(t.rows, jx, jy, upX, upY) {
		rows = append(rows, t.rows[i])
	}
	return t.derive(rows), nil
}

// String renders the table as print(t) shows it.
func (t *ResultTable) String() string { return strings.TrimSuffix(t.render(t.color), "\n") }

// Render writes the table to w.
func (t *ResultTable) Render(w io.Writer, color bool) error {
	_, err := io.WriteString(w, t.render(color))
	return err
}

// render lays the table out: the title, a header, one line per row
// (columns of plans, reports and other values that do not fit a cell are
// left out), and the notes.
func (t *ResultTable) render(color bool) string {
	var b strings.Builder
	if t.title != "" {
		b.WriteString(paint(color, ansiBold, t.title) + "\n")
	}
	var shown []int
	for j := range t.columns {
		if t.plainColumn(j) && t.columns[j] != "plan" && t.columns[j] != "report" {
			shown = append(shown, j)
		}
	}
	g := &textGrid{}
	head := make([]string, len(shown))
	for k, j := range shown {
		head[k] = t.columns[j]
	}
	g.add(head...)
	g.right = make([]bool, len(shown))
	for k, j := range shown {
		for _, r := range t.rows {
			if _, ok := number(r[j]); ok {
				if _, isBool := r[j].(starlark.Bool); !isBool {
					g.right[k] = true
				}
			}
		}
	}
	for _, r := range t.rows {
		cells := make([]string, len(shown))
		for k, j := range shown {
			cells[k] = formatCell(r[j], t.units[j])
		}
		g.add(cells...)
	}
	if len(t.rows) == 0 {
		g.add("(no rows)")
	}
	g.write(&b, "")
	for _, n := range t.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// formatCell writes one cell for people: bytes as fmt_bytes does, seconds
// with three significant figures, fractions as percentages, large numbers
// with thousands separators.
func formatCell(v starlark.Value, unit string) string {
	switch x := v.(type) {
	case starlark.NoneType:
		return "-"
	case starlark.String:
		return string(x)
	case starlark.Bool:
		if x {
			return "yes"
		}
		return "no"
	case starlark.Int:
		n, ok := x.Int64()
		if !ok {
			return x.String()
		}
		if unit == UnitBytes {
			return units.FormatBytes(n)
		}
		if n >= 10000 || n <= -10000 {
			return thousands(n)
		}
		return x.String()
	case starlark.Float:
		f := float64(x)
		switch unit {
		case UnitSeconds:
			return formatSeconds(f)
		case UnitFraction:
			return fmt.Sprintf("%.1f%%", 100*f)
		case UnitBytes:
			if math.Abs(f) < 1e18 { // int64 holds it
				return units.FormatBytes(int64(f))
			}
		}
		if math.Abs(f) >= 1000 && math.Abs(f) < 1e18 { // beyond int64, int64(f) is undefined
			return thousands(int64(math.Round(f)))
		}
		return fmt.Sprintf("%.4g", f)
	}
	return v.String()
}
