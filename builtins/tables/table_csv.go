package tables

import (
	"encoding/csv"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
)

// CSV writes the table for spreadsheets (RFC 4180, as encoding/csv
// writes it): a header of the shown column names, then one record per
// row with the values as JSON has them (memory in bytes, times in
// seconds, fractions from 0 to 1, booleans true and false, None empty;
// swept gpu() or adamw() values as their repr). Title and notes are left
// out: a CSV file holds one table.
func (t *ResultTable) CSV() string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	shown := t.shownColumns()
	record := make([]string, len(shown))
	for k, j := range shown {
		record[k] = t.columns[j]
	}
	w.Write(record)
	for _, r := range t.rows {
		for k, j := range shown {
			record[k] = csvCell(r[j])
		}
		w.Write(record)
	}
	w.Flush() // writes to a strings.Builder cannot fail
	return b.String()
}

// csvCell is one value as CSV holds it.
func csvCell(v starlark.Value) string {
	switch x := shownCell(v).(type) {
	case starlark.NoneType:
		return ""
	case starlark.Bool:
		return strconv.FormatBool(bool(x))
	case starlark.String:
		return string(x)
	case starlark.Float:
		return strconv.FormatFloat(float64(x), 'f', -1, 64) // no exponent: spreadsheets read it as typed
	default:
		return x.String()
	}
}

func tableCSV(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.String(receiver(b).CSV()), nil
}
