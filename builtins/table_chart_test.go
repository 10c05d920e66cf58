package builtins

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/tables"
	"github.com/memsh/memsh/jsondoc"
	"github.com/memsh/memsh/plot"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// chartTable is a hand-made sweep of tp x checkpoint: tp=2 without
// checkpointing does not fit, tp=3 is rejected by the plan (no figures).
// The front of device_used against step_time (both lower is better),
// taken in order of device_used: 40 GiB (1.3 s), 50 GiB (0.8 s, faster),
// 60 GiB (1.0 s, slower than 0.8: off), 90 GiB (0.6 s, faster).
func chartTable() *tables.ResultTable {
	const GiB = 1 << 30
	i := starlark.MakeInt64
	f := func(x float64) starlark.Value { return starlark.Float(x) }
	s := func(x string) starlark.Value { return starlark.String(x) }
	none := starlark.None
	row := func(tp int64, ckpt string, fits starlark.Value, dev, step, mfu starlark.Value, err starlark.Value) []starlark.Value {
		plan := starlark.NewList(nil) // stands for a plan: not plain data
		return []starlark.Value{i(tp), s(ckpt), starlark.MakeInt(1024), fits, dev, step, mfu, err, plan}
	}
	return tables.NewResultTable("sweep of tp (3) x checkpoint (2): 6 plans",
		[]string{"tp", "checkpoint", "seq", "fits", "device_used", "step_time", "mfu", "error", "plan"},
		[]string{"", "", "", "", host.UnitBytes, host.UnitSeconds, host.UnitFraction, "", ""},
		[][]starlark.Value{
			row(1, "none", starlark.True, i(60*GiB), f(1.0), f(0.40), none),
			row(1, "full", starlark.True, i(40*GiB), f(1.3), f(0.30), none),
			row(2, "none", starlark.False, i(90*GiB), f(0.6), f(0.45), none),
			row(2, "full", starlark.True, i(50*GiB), f(0.8), f(0.35), none),
			row(3, "none", none, none, none, none, s("tp=3 does not divide 4 heads")),
			row(3, "full", none, none, none, none, s("tp=3 does not divide 4 heads")),
		}, nil)
}

// emitTable runs src with t predeclared and returns what it emitted.
func emitTable(t *testing.T, tab *tables.ResultTable, src string) ([]host.Emitted, error) {
	t.Helper()
	var got []host.Emitted
	st := &host.State{Emit: func(_ *starlark.Thread, e host.Emitted) error { got = append(got, e); return nil }}
	thread := &starlark.Thread{Name: "test"}
	st.Attach(thread)
	pre := Predeclared()
	pre["t"] = tab
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "c.star", src, pre)
	return got, err
}

func TestEmitTableChartSpec(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want *host.ChartSpec
		err  string
	}{
		// Defaults: the first numeric key column, and step_time (the
		// table has no peak_allocated).
		{src: `emit(t)`, want: &host.ChartSpec{X: "tp", Y: "step_time"}},
		{src: `emit(t, x = "device_used", y = "step_time", pareto = True)`, want: &host.ChartSpec{X: "device_used", Y: "step_time", Pareto: true}},
		{src: `emit(t, y = "mfu", by = "checkpoint")`, want: &host.ChartSpec{X: "tp", Y: "mfu", By: "checkpoint"}},
		{src: `emit(t, x = "step_time")`, want: &host.ChartSpec{X: "step_time", Y: "device_used"}},
		{src: `emit(t, x = "device_usd")`, err: `table has no column "device_usd"`},
		{src: `emit(t, x = "checkpoint")`, err: `x column "checkpoint" holds string values, not numbers`},
		{src: `emit(t, y = "fits")`, err: `y column "fits" holds bool values, not numbers`},
		{src: `emit(t, x = 3)`, err: "x must be a column name (got int)"},
		{src: `emit(t, by = "plan")`, err: `by column "plan" holds list values`},
		{src: `emit(t, pareto = 1)`, err: `for parameter "pareto": got int, want bool`},
		{src: `emit({"a": 1}, x = "a")`, err: "x, y, by and pareto choose the chart of a table from sweep() or search(), not of a dict"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			got, err := emitTable(t, chartTable(), tc.src)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v; want error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got[0].Chart); d != "" {
				t.Errorf("chart (-want +got):\n%s", d)
			}
		})
	}
	// A table of strings only has no default chart, and says so when asked.
	words := tables.NewResultTable("", []string{"a", "b"}, nil, [][]starlark.Value{{starlark.String("x"), starlark.String("y")}}, nil)
	got, err := emitTable(t, words, `emit(t)`)
	if err != nil || got[0].Chart != nil {
		t.Errorf("emit(t) of a table of strings: chart %v, error %v; want none and no error", got[0].Chart, err)
	}
	if _, err := emitTable(t, words, `emit(t, pareto = True)`); err == nil || !strings.Contains(err.Error(), "table has no numeric column to put on x (numeric columns: none)") {
		t.Errorf("pareto on a table of strings: %v", err)
	}
}

func TestTableChart(t *testing.T) {
	const GiB = 1 << 30
	tab := chartTable()
	tc, err := tab.Chart(host.ChartSpec{X: "device_used", Y: "step_time", By: "checkpoint", Pareto: true})
	if err != nil {
		t.Fatal(err)
	}
	// tp varies and is not on the chart: it names the rows; seq is the
	// same in every row, checkpoint is the series.
	want := &plot.TableChart{
		X:      plot.Axis{Name: "device_used", Unit: plot.UnitBytes},
		Y:      plot.Axis{Name: "step_time", Unit: plot.UnitSeconds},
		By:     "checkpoint",
		Fits:   true,
		Pareto: true,
		Series: []plot.Series{
			{Name: "none", Points: []plot.TablePoint{
				{X: 60 * GiB, Y: 1.0, Keys: []string{"tp=1"}},
				{X: 90 * GiB, Y: 0.6, DoesNotFit: true, Front: true, Keys: []string{"tp=2"}},
			}},
			{Name: "full", Points: []plot.TablePoint{
				{X: 40 * GiB, Y: 1.3, Front: true, Keys: []string{"tp=1"}},
				{X: 50 * GiB, Y: 0.8, Front: true, Keys: []string{"tp=2"}},
			}},
		},
		Skipped: 2, // tp=3
	}
	if d := cmp.Diff(want, tc); d != "" {
		t.Errorf("chart (-want +got):\n%s", d)
	}
	// The front is the rows t.pareto returns, in x order.
	rows := tables.ParetoIndexes(tab.Rows(), tab.ColumnIndex("device_used"), tab.ColumnIndex("step_time"), false, false)
	if d := cmp.Diff([]int{1, 3, 2}, rows); d != "" {
		t.Errorf("front rows (-want +got):\n%s", d)
	}

	// tp on x: a swept axis, so the points are joined; mfu is maximized.
	tc, err = tab.Chart(host.ChartSpec{X: "tp", Y: "mfu", Pareto: true})
	if err != nil {
		t.Fatal(err)
	}
	if !tc.Lines || !tc.Y.Higher || tc.X.Higher || len(tc.Series) != 1 || tc.Series[0].Name != "" {
		t.Errorf("tp x mfu: lines %v, y higher %v, x higher %v, %d series", tc.Lines, tc.Y.Higher, tc.X.Higher, len(tc.Series))
	}
	// Least tp first: tp=1 at 0.40 beats tp=1 at 0.30; tp=2 at 0.45 beats both.
	var front2 []string
	for _, p := range tc.Series[0].Points {
		if p.Front {
			front2 = append(front2, strings.Join(p.Keys, " "))
		}
	}
	if got := strings.Join(front2, "; "); got != "checkpoint=none; checkpoint=none" {
		t.Errorf("front of tp x mfu: %q", got)
	}
	if tc.Series[0].Points[2].X != 2 || tc.Series[0].Points[2].Y != 0.45 || !tc.Series[0].Points[2].Front {
		t.Errorf("third point %+v, want tp=2, mfu 0.45 on the front", tc.Series[0].Points[2])
	}
}

func TestTableJSON(t *testing.T) {
	tab := chartTable()
	got, err := emitTable(t, tab, `emit(t, label = "sweep", x = "device_used", y = "step_time", pareto = True)`)
	if err != nil {
		t.Fatal(err)
	}
	thread := &starlark.Thread{}
	line, err := JSONDocument(thread, got[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc jsondoc.Doc
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v\n%s", err, line)
	}
	if doc.Kind != jsondoc.KindTable || doc.Label != "sweep" || doc.At != "c.star:1:5" || doc.Table == nil || doc.Report != nil || doc.Value != nil {
		t.Fatalf("doc %+v", doc)
	}
	tb := doc.Table
	if d := cmp.Diff("sweep of tp (3) x checkpoint (2): 6 plans", tb.Title); d != "" {
		t.Error(d)
	}
	// Plain columns only: no plan.
	if d := cmp.Diff([]string{"tp", "checkpoint", "seq", "fits", "device_used", "step_time", "mfu", "error"}, tb.Columns); d != "" {
		t.Errorf("columns (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"device_used": "bytes", "step_time": "seconds", "mfu": "fraction"}, tb.Units); d != "" {
		t.Errorf("units (-want +got):\n%s", d)
	}
	if d := cmp.Diff(&jsondoc.Chart{X: "device_used", Y: "step_time", Pareto: true}, tb.Chart); d != "" {
		t.Errorf("chart (-want +got):\n%s", d)
	}
	if len(tb.Rows) != 6 || len(tb.Notes) != 0 || tb.Notes == nil {
		t.Fatalf("%d rows, notes %v", len(tb.Rows), tb.Notes)
	}
	// Each row is t.as_dicts()'s, key for key: 60 GiB is 64424509440 bytes.
	for i, want := range map[int]string{
		0: `{"checkpoint":"none","device_used":64424509440,"error":null,"fits":true,"mfu":0.4,"seq":1024,"step_time":1.0,"tp":1}`,
		4: `{"checkpoint":"none","device_used":null,"error":"tp=3 does not divide 4 heads","fits":null,"mfu":null,"seq":1024,"step_time":null,"tp":3}`,
	} {
		b, _ := json.Marshal(tb.Rows[i])
		var g, w any
		_ = json.Unmarshal(b, &g)
		_ = json.Unmarshal([]byte(want), &w)
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("row %d (-want +got):\n%s", i, d)
		}
	}
	// And all rows are json.encode(t.as_dicts())'s.
	pre := Predeclared()
	pre["t"] = tab
	st := &host.State{}
	st.Attach(thread)
	enc, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "c.star", "json.encode(t.as_dicts())", pre)
	if err != nil {
		t.Fatal(err)
	}
	var fromDicts, fromDoc any
	_ = json.Unmarshal([]byte(string(enc.(starlark.String))), &fromDicts)
	b, _ := json.Marshal(tb.Rows)
	_ = json.Unmarshal(b, &fromDoc)
	if d := cmp.Diff(fromDicts, fromDoc); d != "" {
		t.Errorf("rows differ from t.as_dicts() (-as_dicts +doc):\n%s", d)
	}
	if !bytes.Contains(line, []byte(`"device_used":64424509440,`)) {
		t.Errorf("bytes not written as an int: %s", line)
	}
}

func TestPrintEmittedTable(t *testing.T) {
	tab := chartTable()
	var b strings.Builder
	if err := PrintEmitted(&b, host.Emitted{Value: tab, Label: "tp"}, false); err != nil {
		t.Fatal(err)
	}
	if want := "tp:\n" + tab.RenderText(false); b.String() != want {
		t.Errorf("printed (-want +got):\n%s", cmp.Diff(want, b.String()))
	}
}
