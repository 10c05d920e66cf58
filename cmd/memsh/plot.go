package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/plot"
)

// cmdPlot is memsh plot [-o OUT] [--html] FILE [ARGS...]: run the script
// and draw the memory timelines of the reports it emits (or, when it
// emits none, of the last report it simulated) as an SVG, or an HTML page
// with the SVG and the report tables.
func (e *env) cmdPlot(operands []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.out.out, "o", e.out.out, "")
	fs.BoolVar(&e.out.html, "html", e.out.html, "")
	operands, err := parseInterspersed(fs, operands)
	if err != nil {
		return err
	}
	if len(operands) == 0 {
		return usagef("plot needs a script: memsh plot [-o OUT.svg] [--html] FILE.star [ARGS...]")
	}
	file, args := operands[0], operands[1:]
	// The drawing owns stdout when there is no -o; the script's output
	// goes to stderr then.
	sr := scriptRun{
		file: file, args: args,
		out: e.stdout, color: useColor(e.color, e.stdout, e.getenv),
		errOut: e.stderr, errColor: useColor(e.color, e.stderr, e.getenv),
	}
	if e.out.out == "" || e.out.out == "-" {
		sr.out, sr.color = e.stderr, sr.errColor
	}
	res, err := e.execScript(e.ctx, sr)
	if err != nil {
		return err
	}
	if e.out.out == "" || e.out.out == "-" {
		return drawPlot(e.stdout, e.out.html, file, res)
	}
	return writePlot(e.out.out, e.out.html, file, res)
}

// writePlot draws res into the file name (an SVG, or HTML when html).
func writePlot(name string, html bool, script string, res *scriptResult) error {
	var b bytes.Buffer
	if err := drawPlot(&b, html, script, res); err != nil {
		return err
	}
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("cannot write the plot: %w", err)
	}
	return nil
}

// errNothingToPlot says the script gave no report.
var errNothingToPlot = errors.New("nothing to plot: the script emitted no report and simulated none (emit(simulate(plan)) chooses what to draw)")

// drawPlot writes the charts of res: one per emitted report, in order,
// else the last report simulated.
func drawPlot(w io.Writer, html bool, script string, res *scriptResult) error {
	type item struct {
		label string
		r     *builtins.Report
	}
	var items []item
	for _, em := range res.emitted {
		if r, ok := em.Value.(*builtins.Report); ok {
			items = append(items, item{em.Label, r})
		}
	}
	if len(items) == 0 && res.last != nil {
		items = append(items, item{"", res.last})
	}
	if len(items) == 0 {
		return errNothingToPlot
	}
	charts := make([]plot.Chart, len(items))
	sections := make([]plot.Section, len(items))
	for i, it := range items {
		sr, err := it.r.WithTimeline()
		if err != nil {
			return err
		}
		title := it.r.Title()
		if it.label != "" {
			title = it.label + " · " + title
		}
		charts[i] = plot.Chart{Title: title, Report: sr}
		var table strings.Builder
		if err := it.r.Render(&table, false); err != nil {
			return err
		}
		sections[i] = plot.Section{Chart: &charts[i], Table: table.String()}
	}
	if html {
		return plot.WriteHTML(w, "memsh: "+script, sections)
	}
	return plot.WriteSVG(w, charts)
}
