package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// scriptRun says how to run one script for run, test and plot.
type scriptRun struct {
	file  string
	src   []byte // the script's text, when it is not read from file (memsh fit)
	args  []string
	out   io.Writer // print() output and, without emit, emitted values
	color bool      // out accepts ANSI colour
	// emit receives each emitted value; nil prints it to out.
	emit func(thread *starlark.Thread, e host.Emitted) error
	// errOut receives a formatted error; errColor colours it.
	errOut   io.Writer
	errColor bool
	// plainErrors drops the script position from errors: memsh fit's
	// script is the command's own, not the user's.
	plainErrors bool
	// errPreface, when set, is a line written before the error: where
	// the script came from (memsh check's plan, imported from a config).
	errPreface string
}

// scriptResult is what a run produced for plotting.
type scriptResult struct {
	emitted []host.Emitted
	last    host.Simulation   // the last report simulate() returned
	all     []host.Simulation // every report simulate() returned, in order (memsh plot --report)
	picked  []host.Simulation // the reports memsh plot draws when the script emits none; nil: the last
}

// execScript runs the script and then its main() function, if it defines
// one, emitting main()'s results. An error is written to errOut and
// errPrinted returned.
func (e *env) execScript(ctx context.Context, sr scriptRun) (*scriptResult, error) {
	ctx, cancel := e.scriptContext(ctx) // --timeout
	defer cancel()
	in := lang.New(lang.Options{MaxSteps: e.maxSteps, Stdout: sr.out, Color: sr.color, Args: sr.args, AllowRead: e.reads.dirs,
		MaxMemory: e.maxMemory.bytes})
	defer in.Close()
	res := &scriptResult{}
	st := in.State()
	st.Progress = progressTo(e.stderr) // bars of long sweeps and searches
	st.Simulated = func(r host.Simulation) { res.last, res.all = r, append(res.all, r) }
	st.Emit = func(thread *starlark.Thread, em host.Emitted) error {
		res.emitted = append(res.emitted, em)
		if sr.emit != nil {
			return sr.emit(thread, em)
		}
		return builtins.PrintEmitted(sr.out, em, sr.color)
	}
	var globals starlark.StringDict
	var err error
	if sr.src != nil {
		globals, err = in.ExecFile(ctx, sr.file, sr.src)
	} else {
		globals, err = in.RunFile(ctx, sr.file)
	}
	if err == nil {
		err = callMain(ctx, in, sr.file, globals)
	}
	if err != nil {
		if sr.plainErrors {
			err = withoutPosition(err)
		}
		if sr.errPreface != "" {
			fmt.Fprintln(sr.errOut, sr.errPreface)
		}
		in.FormatError(sr.errOut, err, sr.errColor)
		if e.out.json { // check's and fit's last document says it (json_verdict.go)
			var plain strings.Builder
			in.FormatError(&plain, err, false)
			e.json.scriptErr = plain.String()
		}
		return res, errPrinted
	}
	return res, nil
}

// withoutPosition is err without the script's position: the error a
// builtin raised (its hint kept), no declaration site.
func withoutPosition(err error) error {
	var ee *starlark.EvalError
	if errors.As(err, &ee) && ee.Unwrap() != nil {
		err = ee.Unwrap()
	}
	var se *units.Error
	if errors.As(err, &se) && se.Origin != "" {
		c := *se
		c.Origin = ""
		return &c
	}
	return err
}

// callMain calls the script's main() with no arguments, if it defines
// one, and emits what it returns: nothing for None, each element of a list
// or tuple, else the value itself.
func callMain(ctx context.Context, in *lang.Interpreter, file string, globals starlark.StringDict) (err error) {
	defer func() {
		if r := recover(); r != nil { // a Go panic is an error, never a stack dump
			err = fmt.Errorf("internal error while running %s's main(): %v", file, r)
		}
	}()
	v, ok := globals["main"]
	if !ok {
		return nil
	}
	fn, ok := v.(*starlark.Function)
	if !ok {
		return fmt.Errorf("%s: main must be a function, which memsh calls after the script runs (got %s)", file, v.Type())
	}
	thread, stop := in.NewThread(ctx)
	defer stop()
	result, err := starlark.Call(thread, fn, nil, nil)
	if err != nil {
		return err
	}
	var values []starlark.Value
	switch r := result.(type) {
	case starlark.NoneType:
	case *starlark.List:
		for i := 0; i < r.Len(); i++ {
			values = append(values, r.Index(i))
		}
	case starlark.Tuple:
		values = r
	default:
		values = []starlark.Value{r}
	}
	for _, v := range values {
		if err := builtins.Emit(thread, host.Emitted{Value: v, At: fn.Position()}); err != nil {
			return fmt.Errorf("main() (%s) returned what memsh cannot emit: %v", host.PosString(fn.Position()), err)
		}
	}
	return nil
}

// runScript is memsh run: print() output and emitted values on stdout; with
// --json, emitted values as JSON lines on stdout and print() on stderr
// (--csv: emitted tables as CSV);
// with --plot FILE, the timelines drawn to FILE afterwards.
func (e *env) runScript(file string, args []string) error {
	sr := scriptRun{
		file: file, args: args,
		out: e.stdout, color: useColor(e.color, e.stdout, e.getenv),
		errOut: e.stderr, errColor: useColor(e.color, e.stderr, e.getenv),
	}
	switch {
	case e.out.json && e.out.csv:
		return usagef("run takes --json or --csv, not both")
	case e.out.json:
		sr.out, sr.color = e.stderr, sr.errColor
		sr.emit = jsonLines{e.stdout}.emit
	case e.out.csv:
		sr.out, sr.color = e.stderr, sr.errColor
		sr.emit = csvTables{e.stdout, new(int)}.emit
	}
	res, err := e.execScript(e.ctx, sr)
	if err != nil {
		return err
	}
	if e.out.plot != "" {
		if err := writePlot(e.out.plot, false, file, res); err != nil {
			return err
		}
	}
	if e.out.snapshot != "" {
		if err := writeSnapshot(e.out.snapshot, res); err != nil {
			return err
		}
	}
	if e.out.trace != "" {
		return writeTrace(e.out.trace, res)
	}
	return nil
}
