package tables

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// tabulate(rows, ...): a table of the script's own results, the same
// value as sweep()'s, so print(t), t.csv(), emit(t) (JSON, charts),
// t.sort() and the rest work on it.

// tableMethodsDoc describes a table's attributes and methods, for
// tabulate's entry (sweep and search point to it).
const tableMethodsDoc = "A table has t.rows (a list of dicts, column -> value), t.columns, t.title, t.notes, len(t), t[i] " +
	"(a row) and for row in t, and the methods: t.best(by=\"step_time\", where=None, maximize=None, fits=True), " +
	"the row with the best value of by (the lowest; the highest for mfu, hfu, tokens_per_s, headroom and fits; " +
	"maximize= a bool or a list of columns overrides) among the rows that fit when the table has a fits column " +
	"(fits=False ranks every row; when none fits it is an error that names the nearest), None when where (a " +
	"function of a row or a dict of column values) leaves no row (by a column of strings is an error); t.pareto(x, y, maximize=None), the rows no " +
	"other row beats in both columns; t.sort(by, reverse=False) (None last); t.filter(fn); t.render(), the text " +
	"print(t) shows; t.as_dicts(), the rows as plain dicts for json.encode; t.csv(), the table as CSV for " +
	"spreadsheets (values as JSON has them: bytes, seconds, fractions from 0 to 1; `memsh run --csv` writes " +
	"emitted tables so); t.plot(path, x=None, y=None, by=None, pareto=False), the chart emit(t, ...) gives memsh plot, " +
	"written as an SVG file (path relative to the script, inside its folder; a search() table draws step_time " +
	"against device_used with its Pareto front ringed). Columns of plans and reports are left out of print(t), as_dicts, JSON and CSV; a swept " +
	"value that is not a string, number or bool (gpu(\"H100\"), adamw8bit()) is shown by its repr, and stays the " +
	"value itself in t.rows."

// TabulateBuiltins is tabulate().
func TabulateBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "tabulate",
		Sig:  "tabulate(rows, columns=None, title=None, formats=None, units=None)",
		Doc: "Makes a table of your own rows, printed with aligned columns: " +
			"print(tabulate([{\"model\": \"7b\", \"peak\": r.peak_allocated}], units={\"peak\": \"bytes\"})). rows is a list of " +
			"dicts (column -> value; columns defaults to their keys in order of appearance, a missing key is None), of " +
			"structs such as r.modules' rows (columns picks their fields, all of them by name by default: " +
			"tabulate(r.modules, columns=[\"name\", \"count\", \"seconds\", \"bound\"], units={\"seconds\": \"seconds\"})) or of " +
			"lists or tuples (then columns names them, one per cell). formats maps a column to a format() spec for " +
			"printing (formats={\"diff\": \"+.1f\"}); units maps a column to \"bytes\" (printed as fmt_bytes does), " +
			"\"seconds\" or \"fraction\" (a percentage), which also label chart axes. Numbers are right-aligned; without " +
			"a format, floats print with four significant figures and large numbers with thousands separators. " +
			"emit(t) writes it as JSON (`memsh run --json`), CSV (`memsh run --csv`) or a chart (`memsh plot`). " +
			tableMethodsDoc,
		Fn: tabulateFn,
	}}
}

func tabulateFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rowsV, columnsV, titleV, formatsV, unitsV starlark.Value = nil, starlark.None, starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rows", &rowsV, "columns?", &columnsV, "title?", &titleV,
		"formats?", &formatsV, "units?", &unitsV); err != nil {
		return nil, err
	}
	title := ""
	switch x := titleV.(type) {
	case starlark.NoneType:
	case starlark.String:
		title = string(x)
	default:
		return nil, fmt.Errorf("tabulate: title must be a string (got %s)", titleV.Type())
	}
	iter, ok := rowsV.(starlark.Iterable)
	if !ok || rowsV.Type() == "string" {
		return nil, fmt.Errorf("tabulate: rows must be a list of dicts, structs or lists (got %s)", rowsV.Type())
	}
	raw := iterated(iter)
	var columns []string
	if columnsV != starlark.None {
		var err error
		if columns, err = stringList(columnsV, "columns"); err != nil {
			return nil, err
		}
	}
	rows, columns, err := tabulateRows(raw, columns)
	if err != nil {
		return nil, err
	}
	t := NewResultTable(title, columns, nil, rows, nil)
	t.showAll = true
	if err := t.setColumnStrings(formatsV, "formats", func(j int, spec string) error {
		for i, r := range rows {
			if _, err := host.FormatSpec(r[j], spec); err != nil {
				return fmt.Errorf("tabulate: formats[%q] on row %d: %v", columns[j], i, err)
			}
		}
		if t.formats == nil {
			t.formats = make([]string, len(columns))
		}
		t.formats[j] = spec
		return nil
	}); err != nil {
		return nil, err
	}
	if err := t.setColumnStrings(unitsV, "units", func(j int, unit string) error {
		switch unit {
		case host.UnitBytes, host.UnitSeconds, host.UnitFraction:
			t.units[j] = unit
			return nil
		}
		return fmt.Errorf("tabulate: units[%q] is %q; a unit is \"bytes\", \"seconds\" or \"fraction\"", columns[j], unit)
	}); err != nil {
		return nil, err
	}
	return t, nil
}

// tabulateRows reads rows of dicts, of structs or of sequences into
// cells, in the order of columns (from the dicts' keys or the structs'
// fields when columns is nil).
func tabulateRows(raw []starlark.Value, columns []string) ([][]starlark.Value, []string, error) {
	kind := ""
	for i, r := range raw {
		k := rowKind(r)
		if k == "" {
			return nil, nil, fmt.Errorf("tabulate: row %d must be a dict, struct, list or tuple (got %s)", i, r.Type())
		}
		if kind == "" {
			kind = k
		} else if k != kind {
			return nil, nil, fmt.Errorf("tabulate: rows must be all dicts, all structs or all lists (row 0 is a %s, row %d a %s)", raw[0].Type(), i, r.Type())
		}
	}
	switch kind {
	case "dict":
		return dictRows(raw, columns)
	case "struct":
		return structRows(raw, columns)
	}
	if columns == nil {
		if len(raw) > 0 {
			return nil, nil, fmt.Errorf("tabulate: rows of lists need columns=[...] to name their cells")
		}
		columns = []string{}
	}
	rows := make([][]starlark.Value, len(raw))
	for i, r := range raw {
		cells := listOf(r)
		if len(cells) != len(columns) {
			return nil, nil, fmt.Errorf("tabulate: row %d has %d cells for %d columns", i, len(cells), len(columns))
		}
		rows[i] = cells
	}
	return rows, columns, nil
}

// rowKind is "dict", "struct" or "list" for the rows tabulate reads, ""
// for any other value.
func rowKind(v starlark.Value) string {
	switch v.(type) {
	case *starlark.Dict:
		return "dict"
	case *starlarkstruct.Struct:
		return "struct"
	case *starlark.List, starlark.Tuple:
		return "list"
	}
	return ""
}

// dictRows reads rows of dicts: a key columns does not list is an error.
func dictRows(raw []starlark.Value, columns []string) ([][]starlark.Value, []string, error) {
	given := columns != nil
	index := map[string]int{}
	for j, c := range columns {
		index[c] = j
	}
	for i, r := range raw {
		for _, k := range r.(*starlark.Dict).Keys() {
			s, ok := k.(starlark.String)
			if !ok {
				return nil, nil, fmt.Errorf("tabulate: row %d has a %s key; columns are named by strings", i, k.Type())
			}
			if _, seen := index[string(s)]; !seen {
				if given {
					return nil, nil, host.WithHint(fmt.Errorf("tabulate: row %d has key %q, which columns does not list", i, string(s)),
						host.DidYouMean(string(s), columns))
				}
				index[string(s)] = len(columns)
				columns = append(columns, string(s))
			}
		}
	}
	if columns == nil {
		columns = []string{}
	}
	rows := make([][]starlark.Value, len(raw))
	for i, r := range raw {
		cells := make([]starlark.Value, len(columns))
		for j := range cells {
			cells[j] = starlark.None
		}
		for _, kv := range r.(*starlark.Dict).Items() {
			cells[index[string(kv[0].(starlark.String))]] = kv[1]
		}
		rows[i] = cells
	}
	return rows, columns, nil
}

// structRows reads rows of structs (r.modules' rows): columns picks
// fields (a field no row has is an error), every field by default, by
// name; a row without a field has None there.
func structRows(raw []starlark.Value, columns []string) ([][]starlark.Value, []string, error) {
	if columns == nil {
		seen := map[string]bool{}
		columns = []string{}
		for _, r := range raw {
			for _, name := range r.(*starlarkstruct.Struct).AttrNames() {
				if !seen[name] {
					seen[name] = true
					columns = append(columns, name)
				}
			}
		}
	}
	rows := make([][]starlark.Value, len(raw))
	found := make([]bool, len(columns))
	for i, r := range raw {
		st := r.(*starlarkstruct.Struct)
		cells := make([]starlark.Value, len(columns))
		for j, c := range columns {
			v, err := st.Attr(c)
			if err != nil || v == nil {
				cells[j] = starlark.None
				continue
			}
			cells[j], found[j] = v, true
		}
		rows[i] = cells
	}
	for j, c := range columns {
		if !found[j] && len(raw) > 0 {
			return nil, nil, host.WithHint(fmt.Errorf("tabulate: no row has a field %q", c),
				host.DidYouMean(c, raw[0].(*starlarkstruct.Struct).AttrNames()))
		}
	}
	return rows, columns, nil
}

// setColumnStrings reads a dict of column -> string (None: none) and
// calls set for each entry, in column order.
func (t *ResultTable) setColumnStrings(v starlark.Value, what string, set func(j int, s string) error) error {
	if v == starlark.None {
		return nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return fmt.Errorf("tabulate: %s must be a dict of column -> string (got %s)", what, v.Type())
	}
	type entry struct {
		j int
		s string
	}
	var entries []entry
	for _, kv := range d.Items() {
		j, err := t.column(what+" key", kv[0])
		if err != nil {
			return fmt.Errorf("tabulate: %w", err)
		}
		s, ok := kv[1].(starlark.String)
		if !ok {
			return fmt.Errorf("tabulate: %s[%q] must be a string (got %s)", what, t.columns[j], kv[1].Type())
		}
		entries = append(entries, entry{j, string(s)})
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].j < entries[b].j })
	for _, e := range entries {
		if err := set(e.j, e.s); err != nil {
			return err
		}
	}
	return nil
}

// stringList reads a list or tuple of distinct strings.
func stringList(v starlark.Value, what string) ([]string, error) {
	switch v.(type) {
	case *starlark.List, starlark.Tuple:
	default:
		return nil, fmt.Errorf("tabulate: %s must be a list of strings (got %s)", what, v.Type())
	}
	seen := map[string]bool{}
	out := []string{}
	for _, x := range listOf(v) {
		s, ok := x.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("tabulate: %s must be a list of strings (got a %s in it)", what, x.Type())
		}
		if seen[string(s)] {
			return nil, fmt.Errorf("tabulate: %s names %q twice", what, string(s))
		}
		seen[string(s)] = true
		out = append(out, string(s))
	}
	return out, nil
}

// formatted is cell v of column j as print(t) writes it: by the column's
// format spec when it has one, else as FormatCell does.
func (t *ResultTable) formatted(v starlark.Value, j int) string {
	if j < len(t.formats) && t.formats[j] != "" {
		if s, err := host.FormatSpec(v, t.formats[j]); err == nil {
			return s
		}
	}
	return FormatCell(shownCell(v), t.units[j])
}
