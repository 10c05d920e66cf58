package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/builtins/tables"
	"github.com/memsh/memsh/live"
	"github.com/memsh/memsh/plot"
	"go.starlark.net/starlark"
)

// servePlot is memsh plot -http ADDR FILE [ARGS...]: a live page of the
// script's charts and tables (package live), rebuilt when the script or
// a .star or .json file beside it is saved, until Ctrl-C. An address
// without a host (":8080") listens on localhost only.
func (e *env) servePlot(addr, file string, args []string) error {
	if strings.HasPrefix(addr, ":") {
		addr = "localhost" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot serve on %s: %v", addr, err)
	}
	srv := e.liveServer(file, args)
	srv.Rebuild(e.ctx)
	fmt.Fprintf(e.stderr, "memsh: serving %s on http://%s/ (Ctrl-C to stop)\n", file, ln.Addr())
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Watch(e.ctx)
	go func() {
		<-e.ctx.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// liveServer is the live page's server for a script: its builds run the
// script, its watch looks at the script's folder.
func (e *env) liveServer(file string, args []string) *live.Server {
	return &live.Server{
		Build: func(ctx context.Context) *live.Page { return e.livePage(ctx, file, args) },
		Files: func() []string { return watchedFiles(file) },
		Log:   e.stderr,
	}
}

// watchedFiles are the script and the .star and .json files in its
// folder (what load() and hf_config() usually read).
func watchedFiles(file string) []string {
	out := []string{file}
	for _, pat := range []string{"*.star", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(filepath.Dir(file), pat))
		for _, f := range m {
			if filepath.Clean(f) != filepath.Clean(file) {
				out = append(out, f)
			}
		}
	}
	return out
}

// livePage runs the script (its output to stderr) and lays out what it
// emitted as memsh plot --html does: each report's timeline and text, each
// table's chart (when emitted with axes) and rows; else the last report
// simulated.
func (e *env) livePage(ctx context.Context, file string, args []string) *live.Page {
	var errText bytes.Buffer
	sr := scriptRun{
		file: file, args: args,
		out: e.stderr, color: useColor(e.color, e.stderr, e.getenv),
		errOut: &errText, errColor: false,
		emit: func(*starlark.Thread, host.Emitted) error { return nil }, // on the page, not printed
	}
	p := &live.Page{Title: "memsh: " + file}
	res, err := e.execScript(ctx, sr)
	if err != nil {
		p.Err = strings.TrimSpace(errText.String())
		if p.Err == "" {
			p.Err = err.Error()
		}
		fmt.Fprintln(e.stderr, p.Err)
		return p
	}
	for _, em := range res.emitted {
		var sec live.Section
		var err error
		switch v := em.Value.(type) {
		case *reports.Report:
			sec, err = reportSection(v, em.Label)
		case *tables.ResultTable:
			sec, err = tableSection(v, em)
		default:
			continue
		}
		if err != nil {
			p.Err = err.Error()
			return p
		}
		p.Sections = append(p.Sections, sec)
	}
	if len(p.Sections) == 0 && res.last != nil {
		sec, err := reportSection(res.last, "")
		if err != nil {
			p.Err = err.Error()
			return p
		}
		p.Sections = append(p.Sections, sec)
	}
	if len(p.Sections) == 0 {
		p.Err = errNothingToPlot.Error()
	}
	return p
}

// reportSection is a report's timeline, text and hover data.
func reportSection(r host.Simulation, label string) (live.Section, error) {
	svg, alive, err := timelineOf(r, label)
	if err != nil {
		return live.Section{}, err
	}
	var text strings.Builder
	if err := r.Render(&text, false); err != nil {
		return live.Section{}, err
	}
	return live.Section{SVG: svg, Text: text.String(), Alive: alive}, nil
}

// timelineOf draws a report's timeline and answers what is alive at each
// of its events (the trace is replayed on the first question).
func timelineOf(r host.Simulation, label string) (string, func(int) (live.Moment, error), error) {
	tl, err := r.WithTimeline()
	if err != nil {
		return "", nil, err
	}
	title := r.Title()
	if label != "" {
		title = label + " · " + title
	}
	var b bytes.Buffer
	if err := plot.WriteSVG(&b, []plot.Chart{{Title: title, Report: tl}}); err != nil {
		return "", nil, err
	}
	var mu sync.Mutex // requests come concurrently
	var timeline *live.Timeline
	alive := func(event int) (live.Moment, error) {
		mu.Lock()
		defer mu.Unlock()
		if timeline == nil {
			traced, err := r.WithTrace()
			if err != nil {
				return live.Moment{}, err
			}
			if timeline, err = live.NewTimeline(tl, traced); err != nil {
				return live.Moment{}, err
			}
		}
		return timeline.At(event)
	}
	return b.String(), alive, nil
}

// tableSection is a table's chart (when emitted with axes), its cells,
// and its rows' timelines when the rows hold reports.
func tableSection(t *tables.ResultTable, em host.Emitted) (live.Section, error) {
	var sec live.Section
	if em.Chart != nil {
		tc, err := t.Chart(*em.Chart)
		if err != nil {
			return sec, err
		}
		title := t.Title()
		if em.Label != "" {
			title = em.Label + " · " + title
		}
		var b bytes.Buffer
		if err := plot.WriteSVG(&b, []plot.Chart{{Title: title, Table: tc}}); err != nil {
			return sec, err
		}
		sec.SVG = b.String()
	}
	head, rows, right := t.Cells()
	sec.Table = &live.Table{Title: t.Title(), Head: head, Rows: rows, Right: right, Notes: t.Notes()}
	if _, ok := t.Report(0); ok {
		sec.Row = func(i int) (*live.RowChart, error) {
			r, ok := t.Report(i)
			if !ok {
				return nil, fmt.Errorf("row %d has no report", i+1)
			}
			svg, alive, err := timelineOf(r, fmt.Sprintf("row %d", i+1))
			if err != nil {
				return nil, err
			}
			return &live.RowChart{SVG: svg, Alive: alive}, nil
		}
	}
	return sec, nil
}
