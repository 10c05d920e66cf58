package builtins

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/builtins/tables"
	"go.starlark.net/starlark"
)

func outputBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "emit",
		Sig:  "emit(value, label=None, x=None, y=None, by=None, pareto=False)",
		Doc: "Hands a result to whoever runs the script: a report, a table from sweep() or search(), or any value " +
			"json.encode accepts. A plain `memsh run` prints it as print() would (after \"label:\" when a label is " +
			"given); `memsh run --json` writes it to stdout as one JSON document per line (docs/json.md) and sends " +
			"print() output to stderr; `memsh plot` draws the timelines of the emitted reports and the charts of " +
			"the emitted tables (without emit, the last report simulated). For a table, x and y name the numeric " +
			"columns on the axes (default: the first numeric swept axis or layout column, and peak_allocated or " +
			"step_time), by a column whose values are drawn as separate series (joined by lines along a swept x), " +
			"and pareto=True rings the rows t.pareto(x, y) returns (t.filter() first to leave out rows that do " +
			"not fit): emit(t, x=\"batch\", y=\"peak_allocated\", by=\"checkpoint\"). Rows that do not fit are " +
			"drawn as crosses. When the script defines main(), memsh run, test and plot call it " +
			"with no arguments after the script runs and emit its result (None: nothing; a list or tuple: each " +
			"element; else the value).",
		Fn: emitFn,
	}, {
		Name: "expect",
		Sig:  "expect(cond, msg=None)",
		Doc: "Fails the script, with the position of the call and msg, unless cond is True: budgets as " +
			"assertions, expect(r.peak_allocated < 70 * GiB, \"peak over the 70 GiB budget\"). cond must be " +
			"a bool. `memsh test` reports the failure as the script's; `memsh run` exits with status 1.",
		Fn: expectFn,
	}}
}

func emitFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var label, x, y, by starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None
	pareto := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "label?", &label,
		"x?", &x, "y?", &y, "by?", &by, "pareto?", &pareto); err != nil {
		return nil, err
	}
	e := host.Emitted{Value: v, At: host.CallerPos(thread)}
	switch l := label.(type) {
	case starlark.NoneType:
	case starlark.String:
		e.Label = string(l)
	default:
		return nil, fmt.Errorf("label must be a string (got %s)", label.Type())
	}
	if t, ok := v.(*tables.ResultTable); ok {
		spec, err := t.ChartSpec(x, y, by, pareto)
		if err != nil {
			return nil, err
		}
		e.Chart = spec
	} else if !tables.IsNone(x) || !tables.IsNone(y) || !tables.IsNone(by) || pareto {
		return nil, fmt.Errorf("x, y, by and pareto choose the chart of a table from sweep() or search(), not of a %s", v.Type())
	}
	if err := Emit(thread, e); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

// Emit checks that e's value can be written as JSON and hands it to the
// run's State.Emit, or prints it to State.Out when the host set none.
func Emit(thread *starlark.Thread, e host.Emitted) error {
	switch v := e.Value.(type) {
	case *reports.Report:
	case *tables.ResultTable:
		if e.Chart == nil { // a table main() returns: the default chart
			e.Chart, _ = v.ChartSpec(nil, nil, nil, false)
		}
	default:
		if _, err := host.EncodeJSON(thread, e.Value); err != nil {
			return fmt.Errorf("cannot emit %s: %v (emit takes a report, a table, or a value json.encode accepts: use r.as_dict() for a report inside one)", e.Value.Type(), err)
		}
	}
	st := host.StateOf(thread)
	if st.Emit != nil {
		return st.Emit(thread, e)
	}
	return PrintEmitted(st.Out, e, st.Color)
}

// PrintEmitted writes e as a plain run shows it: a report or a table
// rendered, or the value as print() writes it, after "label:" when e has
// a label.
func PrintEmitted(w io.Writer, e host.Emitted, color bool) error {
	var text string
	switch v := e.Value.(type) {
	case *reports.Report, *tables.ResultTable:
		var b strings.Builder
		if err := v.(host.Renderer).Render(&b, color); err != nil {
			return err
		}
		text = b.String()
		if e.Label != "" {
			text = e.Label + ":\n" + text
		}
	case starlark.String:
		text = string(v) + "\n"
	default:
		text = v.String() + "\n"
	}
	if e.Label != "" {
		switch e.Value.(type) {
		case *reports.Report, *tables.ResultTable:
		default:
			text = e.Label + ": " + text
		}
	}
	_, err := io.WriteString(w, text)
	return err
}

func expectFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var cond, msg starlark.Value = nil, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "cond", &cond, "msg?", &msg); err != nil {
		return nil, err
	}
	ok, isBool := cond.(starlark.Bool)
	if !isBool {
		return nil, fmt.Errorf("cond must be a bool (got %s): compare explicitly, as in expect(r.peak_allocated < 70 * GiB, \"over budget\")", cond.Type())
	}
	text := ""
	switch m := msg.(type) {
	case starlark.NoneType:
	case starlark.String:
		text = string(m)
	default:
		return nil, fmt.Errorf("msg must be a string (got %s)", msg.Type())
	}
	if ok {
		return starlark.None, nil
	}
	if text == "" {
		return nil, errors.New("expectation failed")
	}
	return nil, fmt.Errorf("expectation failed: %s", text)
}
