package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/builtins/tables"
	"github.com/memsh/memsh/plot"
)

// cmdPlot is memsh plot [-o OUT] [--html] [--report N|all] FILE [ARGS...]:
// run the script and draw the memory timelines of the reports it emits and
// the charts of the tables it emits (or, when it emits none, the timeline
// of the last report it simulated, or of the one --report picks) as an
// SVG, or an HTML page with the SVG and the tables.
func (e *env) cmdPlot(operands []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.out.out, "o", e.out.out, "")
	fs.BoolVar(&e.out.html, "html", e.out.html, "")
	fs.StringVar(&e.out.http, "http", e.out.http, "")
	fs.StringVar(&e.out.report, "report", e.out.report, "")
	operands, err := parseInterspersed(fs, operands)
	if err != nil {
		return err
	}
	if len(operands) == 0 {
		return usagef("plot needs a script: memsh plot [-o OUT.svg] [--html] [--report N|all] [-http ADDR] FILE.star [ARGS...]")
	}
	if r := e.out.report; r != "" && r != "all" {
		if n, err := strconv.Atoi(r); err != nil || n < 1 {
			return usagef("--report takes the number of a report the script simulates (1 is the first) or all (got %q)", r)
		}
	}
	if e.out.http == "" {
		html, err := plotFormat(e.out.out, e.out.html)
		if err != nil {
			return err
		}
		e.out.html = html
	}
	file, args := operands[0], operands[1:]
	if e.out.http != "" {
		if e.out.out != "" || e.out.html || e.out.report != "" {
			return usagef("plot -http serves a live page: it takes no -o, --html or --report")
		}
		return e.servePlot(e.out.http, file, args)
	}
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
	if err := res.pick(e.out.report, e.stderr); err != nil {
		return err
	}
	if e.out.out == "" || e.out.out == "-" {
		return drawPlot(e.stdout, e.out.html, file, res)
	}
	return writePlot(e.out.out, e.out.html, file, res)
}

// plotFormat is the format of plot -o name by its extension, checked
// before the script runs: .html or .htm the HTML page (as --html), .svg
// the SVG (--html then is an error); any other name an error (an SVG
// written to step.png opens in no image viewer; t.plot() refuses it too).
// Stdout ("" or "-") is what --html says.
func plotFormat(name string, html bool) (bool, error) {
	lower := strings.ToLower(name)
	switch {
	case name == "" || name == "-":
		return html, nil
	case strings.HasSuffix(lower, ".html") || strings.HasSuffix(lower, ".htm"):
		return true, nil
	case !strings.HasSuffix(lower, ".svg"):
		return false, usagef("memsh plot writes an SVG (-o NAME.svg) or an HTML page (-o NAME.html): %q ends in neither", name)
	case html:
		return false, usagef("--html writes an HTML page: name it .html (got %q)", name)
	}
	return false, nil
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

// errNothingToPlot says the script gave no report or table.
var errNothingToPlot = errors.New("nothing to plot: the script emitted no report or table and simulated none (emit(simulate(plan)) or emit(sweep(...), x=..., y=...) chooses what to draw)")

// drawPlot writes the charts of res: one per emitted report (its
// timeline) or table (its chart), in order, else the last report
// simulated.
func drawPlot(w io.Writer, html bool, script string, res *scriptResult) error {
	var charts []plot.Chart
	var rendered []string
	for _, em := range res.emitted {
		var c plot.Chart
		var table strings.Builder
		switch v := em.Value.(type) {
		case *reports.Report:
			sr, err := v.WithTimeline()
			if err != nil {
				return err
			}
			c = plot.Chart{Title: v.Title(), Report: sr}
			if err := v.Render(&table, false); err != nil {
				return err
			}
		case *tables.ResultTable:
			if em.Chart == nil {
				return fmt.Errorf("%s: cannot chart the table: it has no two numeric columns", host.PosString(em.At))
			}
			tc, err := v.Chart(*em.Chart)
			if err != nil {
				return err
			}
			c = plot.Chart{Title: v.Title(), Table: tc}
			if err := v.Render(&table, false); err != nil {
				return err
			}
		default:
			continue
		}
		if em.Label != "" {
			c.Title = em.Label + " · " + c.Title
		}
		charts = append(charts, c)
		rendered = append(rendered, table.String())
	}
	picked := res.picked
	if picked == nil && res.last != nil {
		picked = []host.Simulation{res.last}
	}
	if len(charts) > 0 { // the script chose what to draw
		picked = nil
	}
	for _, r := range picked {
		sr, err := r.WithTimeline()
		if err != nil {
			return err
		}
		charts = append(charts, plot.Chart{Title: r.Title(), Report: sr})
		var table strings.Builder
		if err := r.Render(&table, false); err != nil {
			return err
		}
		rendered = append(rendered, table.String())
	}
	if len(charts) == 0 {
		return errNothingToPlot
	}
	if html {
		sections := make([]plot.Section, len(charts))
		for i := range charts {
			sections[i] = plot.Section{Chart: &charts[i], Table: rendered[i]}
		}
		return plot.WriteHTML(w, "memsh: "+script, sections)
	}
	return plot.WriteSVG(w, charts)
}

// pick chooses which simulated reports memsh plot draws when the script
// emits none: the one --report names (from 1), all of them, or by default
// the last, saying on w when there were others to choose from.
func (res *scriptResult) pick(report string, w io.Writer) error {
	emitsCharts := false
	for _, em := range res.emitted {
		switch em.Value.(type) {
		case *reports.Report, *tables.ResultTable:
			emitsCharts = true
		}
	}
	n := len(res.all)
	switch {
	case emitsCharts:
		if report != "" {
			fmt.Fprintf(w, "memsh plot: --report %s is not used: the script emits what to draw\n", report)
		}
	case report == "all":
		res.picked = res.all
	case report != "":
		k, _ := strconv.Atoi(report)
		if k > n {
			return fmt.Errorf("--report %d: the script simulates %s", k, plural(n, "report"))
		}
		res.picked = res.all[k-1 : k]
	case n > 1:
		fmt.Fprintf(w, "memsh plot: drawing the last of the %d reports the script simulates; --report N (1 to %d) or --report all draws others, emit(r) in the script chooses\n", n, n)
	}
	return nil
}
