package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/builtins/tables"
	"github.com/memsh/memsh/plot"
)

// cmdPlot is memsh plot [-o OUT] [--html] FILE [ARGS...]: run the script
// and draw the memory timelines of the reports it emits and the charts of
// the tables it emits (or, when it emits none, the timeline of the last
// report it simulated) as an SVG, or an HTML page with the SVG and the
// tables.
func (e *env) cmdPlot(operands []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.out.out, "o", e.out.out, "")
	fs.BoolVar(&e.out.html, "html", e.out.html, "")
	fs.StringVar(&e.out.http, "http", e.out.http, "")
	operands, err := parseInterspersed(fs, operands)
	if err != nil {
		return err
	}
	if len(operands) == 0 {
		return usagef("plot needs a script: memsh plot [-o OUT.svg] [--html] [-http ADDR] FILE.star [ARGS...]")
	}
	file, args := operands[0], operands[1:]
	if e.out.http != "" {
		if e.out.out != "" || e.out.html {
			return usagef("plot -http serves a live page: it takes no -o or --html")
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
	if len(charts) == 0 && res.last != nil {
		sr, err := res.last.WithTimeline()
		if err != nil {
			return err
		}
		charts = append(charts, plot.Chart{Title: res.last.Title(), Report: sr})
		var table strings.Builder
		if err := res.last.Render(&table, false); err != nil {
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
