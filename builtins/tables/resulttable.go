package tables

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// ResultTable is the Starlark value of a table of results (type "table"),
// from sweep(), search() and tabulate(): rows of named cells, one column per axis or
// figure. The Go API for other packages (plots, JSON) is Columns, Rows,
// Column, Units, Title and Notes; a table never changes after it is made
// (sort, filter and pareto return new tables).
//
// In Starlark: t.rows (a list of dicts, column -> value), t.columns,
// t.best(by=, where=, fits=True), t.pareto(x, y), t.sort(by,
// reverse=False), t.filter(fn), t.render(), t.as_dicts(), t.csv(),
// len(t), t[i] (a row), for row in t; print(t) shows the aligned table.
// tableMethodsDoc (tabulate.go) documents them for users.
type ResultTable struct {
	title   string
	columns []string
	units   []string // per column: UnitBytes, UnitSeconds, UnitFraction, or ""
	rows    [][]starlark.Value
	notes   []string
	color   bool
	// showAll shows every column (a tabulate() table), values that are
	// not plain by their repr; formats are tabulate()'s per-column format
	// specs for printing ("" or nil: none).
	showAll bool
	formats []string
	// chart is the chart emit and t.plot() draw when given no axes (nil:
	// ChartSpec's defaults); search() draws step time against memory.
	chart *host.ChartSpec
}

var (
	_ starlark.HasAttrs  = (*ResultTable)(nil)
	_ starlark.Indexable = (*ResultTable)(nil)
	_ starlark.Iterable  = (*ResultTable)(nil)
	_ host.Renderer      = (*ResultTable)(nil)
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
	j := t.ColumnIndex(name)
	if j < 0 {
		return nil, false
	}
	out := make([]starlark.Value, len(t.rows))
	for i, r := range t.rows {
		out[i] = r[j]
	}
	return out, true
}

func (t *ResultTable) ColumnIndex(name string) int {
	for j, c := range t.columns {
		if c == name {
			return j
		}
	}
	return -1
}

// derive is a table with t's columns and the given rows.
func (t *ResultTable) derive(rows [][]starlark.Value) *ResultTable {
	return &ResultTable{title: t.title, columns: t.columns, units: t.units, rows: rows, notes: t.notes, color: t.color,
		showAll: t.showAll, formats: t.formats, chart: t.chart}
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

// row is row i as a frozen dict; plain keeps only the shown columns,
// with each cell as shownCell writes it.
func (t *ResultTable) row(i int, plain bool) *starlark.Dict {
	d := starlark.NewDict(len(t.columns))
	for j, c := range t.columns {
		v := t.rows[i][j]
		if plain {
			if !t.shownColumn(j) {
				continue
			}
			v = shownCell(v)
		}
		_ = d.SetKey(starlark.String(c), v)
	}
	d.Freeze()
	return d
}

// shownColumn says whether column j is printed and written out (as_dicts,
// JSON, CSV): a column of plain cells, or a key column (a sweep's axis, a
// search's layout) whatever it holds, so that rows swept over gpu() or
// adamw() values can be told apart; never plans or reports.
func (t *ResultTable) shownColumn(j int) bool {
	if t.showAll {
		return true
	}
	if t.columns[j] == "plan" || t.columns[j] == "report" {
		return false
	}
	if t.plainColumn(j) {
		return true
	}
	for _, k := range t.keyColumns() {
		if k == j {
			return true
		}
	}
	return false
}

// shownCell is a cell as print(t), as_dicts(), JSON and CSV show it: a
// plain value as it is, any other (a gpu(), an optimizer) as its repr,
// up to its first line break (a report's repr is a whole table).
func shownCell(v starlark.Value) starlark.Value {
	if isPlain(v) {
		return v
	}
	s, _, _ := strings.Cut(v.String(), "\n")
	return starlark.String(s)
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

var tableAttrNames = []string{"as_dicts", "best", "columns", "csv", "filter", "notes", "pareto", "plot", "render", "rows", "sort", "title"}

func (t *ResultTable) AttrNames() []string { return tableAttrNames }

func (t *ResultTable) Attr(name string) (starlark.Value, error) {
	switch name {
	case "rows":
		out := make([]starlark.Value, len(t.rows))
		for i := range t.rows {
			out[i] = t.row(i, false)
		}
		return host.FrozenList(out), nil
	case "columns":
		out := make([]starlark.Value, len(t.columns))
		for j, c := range t.columns {
			out[j] = starlark.String(c)
		}
		return host.FrozenList(out), nil
	case "notes":
		out := make([]starlark.Value, len(t.notes))
		for j, n := range t.notes {
			out[j] = starlark.String(n)
		}
		return host.FrozenList(out), nil
	case "title":
		return starlark.String(t.title), nil
	}
	fn, ok := tableMethods[name]
	if !ok {
		return nil, nil
	}
	return starlark.NewBuiltin(name, fn).BindReceiver(t), nil
}

// String renders the table as print(t) shows it.
func (t *ResultTable) String() string { return strings.TrimSuffix(t.RenderText(t.color), "\n") }

// Render writes the table to w.
func (t *ResultTable) Render(w io.Writer, color bool) error {
	_, err := io.WriteString(w, t.RenderText(color))
	return err
}

// shownColumns are the indexes of the shown columns, in order.
func (t *ResultTable) shownColumns() []int {
	var shown []int
	for j := range t.columns {
		if t.shownColumn(j) {
			shown = append(shown, j)
		}
	}
	return shown
}

// Cells are the shown columns' names and each row's cells as printing
// formats them, and which columns hold numbers (aligned right).
func (t *ResultTable) Cells() (head []string, rows [][]string, right []bool) {
	shown := t.shownColumns()
	head = make([]string, len(shown))
	right = make([]bool, len(shown))
	for k, j := range shown {
		head[k] = t.columns[j]
		for _, r := range t.rows {
			if _, ok := number(r[j]); ok {
				if _, isBool := r[j].(starlark.Bool); !isBool {
					right[k] = true
				}
			}
		}
	}
	for _, r := range t.rows {
		cells := make([]string, len(shown))
		for k, j := range shown {
			cells[k] = t.formatted(r[j], j)
		}
		rows = append(rows, cells)
	}
	return head, rows, right
}

// Report is row i's report (the "report" column of sweep(), search() and
// advise() tables), if it has one.
func (t *ResultTable) Report(i int) (host.Simulation, bool) {
	j := t.ColumnIndex("report")
	if j < 0 || i < 0 || i >= len(t.rows) {
		return nil, false
	}
	s, ok := t.rows[i][j].(host.Simulation)
	return s, ok
}

// RenderText lays the table out: the title, a header, one line per row
// (the shown columns: plans, reports and other values that are not a
// swept axis are left out), and the notes.
func (t *ResultTable) RenderText(color bool) string {
	var b strings.Builder
	if t.title != "" {
		b.WriteString(host.Paint(color, host.StyleBold, t.title) + "\n")
	}
	head, rows, right := t.Cells()
	g := &host.TextGrid{Right: right}
	g.Add(head...)
	for _, cells := range rows {
		g.Add(cells...)
	}
	if len(t.rows) == 0 {
		g.Add("(no rows)")
	}
	g.Write(&b, "")
	for _, n := range t.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// formatCell writes one cell for people: bytes as fmt_bytes does, seconds
// with three significant figures, fractions as percentages, large numbers
// with thousands separators.
func FormatCell(v starlark.Value, unit string) string {
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
		if unit == host.UnitBytes {
			return units.FormatBytes(n)
		}
		if n >= 10000 || n <= -10000 {
			return host.Thousands(n)
		}
		return x.String()
	case starlark.Float:
		f := float64(x)
		switch unit {
		case host.UnitSeconds:
			return reports.FormatSeconds(f)
		case host.UnitFraction:
			return fmt.Sprintf("%.1f%%", 100*f)
		case host.UnitBytes:
			if math.Abs(f) < 1e18 { // int64 holds it
				return units.FormatBytes(int64(f))
			}
		}
		if math.Abs(f) >= 1000 && math.Abs(f) < 1e18 { // beyond int64, int64(f) is undefined
			return host.Thousands(int64(math.Round(f)))
		}
		return fmt.Sprintf("%.4g", f)
	}
	return v.String()
}
