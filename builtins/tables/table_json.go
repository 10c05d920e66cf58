package tables

import (
	"encoding/json"
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/jsondoc"
	"go.starlark.net/starlark"
)

// TableDocument converts t to the schema's Table: its shown columns (not
// plans or reports; swept gpu() or adamw() values as their repr), with rows as t.as_dicts() gives them, so that the
// JSON and the Starlark dicts cannot disagree; chart is the emitted
// chart, or nil.
func TableDocument(thread *starlark.Thread, t *ResultTable, chart *host.ChartSpec) (*jsondoc.Table, error) {
	doc := &jsondoc.Table{Title: t.title, Columns: []string{}, Units: map[string]string{}, Notes: []string{},
		Rows: []map[string]json.RawMessage{}}
	for _, j := range t.shownColumns() {
		c := t.columns[j]
		doc.Columns = append(doc.Columns, c)
		if t.units[j] != "" {
			doc.Units[c] = t.units[j]
		}
	}
	doc.Notes = append(doc.Notes, t.notes...)
	rows := make([]starlark.Value, len(t.rows))
	for i := range t.rows {
		rows[i] = t.row(i, true)
	}
	s, err := host.EncodeJSON(thread, starlark.NewList(rows))
	if err != nil {
		return nil, fmt.Errorf("internal error: table as JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(s), &doc.Rows); err != nil {
		return nil, fmt.Errorf("internal error: table as JSON: %v", err)
	}
	if chart != nil {
		doc.Chart = &jsondoc.Chart{X: chart.X, Y: chart.Y, By: chart.By, Pareto: chart.Pareto}
	}
	return doc, nil
}
