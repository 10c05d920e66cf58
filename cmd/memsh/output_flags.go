package main

import (
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// outputFlags are the flags of the commands that write results for other
// tools: run --json, --csv and --plot FILE, plot -o FILE and --html, test
// --update, doc --markdown. They are parsed with the common flags (before
// or after the command); check rejects one given to a command that does
// not take it.
type outputFlags struct {
	json     bool   // run: emitted values as JSON lines on stdout
	csv      bool   // run: emitted tables as CSV on stdout
	plot     string // run: also draw the timeline SVG to this file
	snapshot string // run: also write the step as a PyTorch memory snapshot to this file
	trace    string // run: also write the step's time as a Perfetto (Chrome trace-event) JSON file
	out      string // plot: the output file ("" is stdout)
	html     bool   // plot: an HTML page instead of an SVG
	http     string // plot: serve a live page on this address
	report   string // plot: which simulated report to draw when none is emitted: N (from 1) or all
	update   bool   // test: rewrite the golden files
	markdown bool   // doc: the reference in Markdown
	fit      fitFlags
	gate     checkFlags
	set      map[string]bool
}

// outputFlagCommands says which commands take each output flag.
var outputFlagCommands = map[string]string{
	"json": "run fit compare check", "csv": "run", "plot": "run", "snapshot": "run", "trace": "run", "o": "plot", "html": "plot", "http": "plot", "report": "plot", "update": "test", "markdown": "doc",
	"gpu": "fit check", "seq": "fit check", "batch": "fit", "gpus": "fit check", "precision": "fit", "images": "fit", "videos": "fit", "top": "fit check",
	"lora": "fit", "qlora": "fit", "checkpoint": "fit", "targets": "fit",
	"model": "check", "nodes": "check", "headroom": "check", "emit-star": "check", "trainer": "check", "config": "check",
}

// register adds the output flags to fs.
func (o *outputFlags) register(fs *flag.FlagSet) {
	boolean := func(name string, p *bool) {
		fs.BoolFunc(name, "", func(s string) error {
			v, err := strconv.ParseBool(s)
			if err != nil {
				return err
			}
			*p = v
			o.mark(name)
			return nil
		})
	}
	str := func(name string, p *string) {
		fs.Func(name, "", func(s string) error {
			*p = s
			o.mark(name)
			return nil
		})
	}
	boolean("json", &o.json)
	boolean("csv", &o.csv)
	str("plot", &o.plot)
	str("snapshot", &o.snapshot)
	str("trace", &o.trace)
	str("o", &o.out)
	boolean("html", &o.html)
	str("http", &o.http)
	str("report", &o.report)
	boolean("update", &o.update)
	boolean("markdown", &o.markdown)
	integer := func(name string, p *int64) {
		fs.Func(name, "", func(s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return fmt.Errorf("want a whole number (got %q)", s)
			}
			*p = n
			o.mark(name)
			return nil
		})
	}
	if o.fit == (fitFlags{}) { // the defaults, once: commands parse the flags again after their operands
		o.fit = fitFlags{gpu: "H100-80GB", batch: 1, gpus: 1, precision: "bf16-mixed", top: 5, ckpt: "none"}
	}
	str("gpu", &o.fit.gpu)
	integer("seq", &o.fit.seq)
	integer("batch", &o.fit.batch)
	integer("gpus", &o.fit.gpus)
	str("precision", &o.fit.precision)
	str("images", &o.fit.images)
	str("videos", &o.fit.videos)
	integer("top", &o.fit.top)
	integer("lora", &o.fit.lora)
	integer("qlora", &o.fit.qlora)
	str("checkpoint", &o.fit.ckpt)
	str("targets", &o.fit.targets)
	if o.gate.nodes == 0 { // the defaults, once
		o.gate.nodes = 1
	}
	str("model", &o.gate.model)
	integer("nodes", &o.gate.nodes)
	str("trainer", &o.gate.trainer)
	str("config", &o.gate.function)
	boolean("emit-star", &o.gate.emitStar)
	fs.Func("headroom", "", func(s string) error {
		if err := o.gate.headroom.Set(s); err != nil {
			return err
		}
		o.mark("headroom")
		return nil
	})
}

func (o *outputFlags) mark(name string) {
	if o.set == nil {
		o.set = map[string]bool{}
	}
	o.set[name] = true
}

// check returns a usage error for an output flag that cmd does not take.
func (o *outputFlags) check(cmd string) error {
	var names []string
	for name := range o.set {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if want := outputFlagCommands[name]; !slices.Contains(strings.Fields(want), cmd) {
			dash := "--"
			if len(name) == 1 {
				dash = "-"
			}
			return usagef("%s%s is a flag of memsh %s, not of %s", dash, name, andList(strings.Fields(want)), cmd)
		}
	}
	return nil
}

// parseInterspersed parses the flags of fs wherever they appear among
// args and returns the operands in order; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return append(operands, args[1:]...), nil
		case strings.HasPrefix(a, "-") && a != "-":
			if err := fs.Parse(args); err != nil {
				return nil, flagError(fs, args, err)
			}
			rest := fs.Args()
			if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
				return append(operands, rest...), nil
			}
			args = rest
		default:
			operands = append(operands, a)
			args = args[1:]
		}
	}
	return operands, nil
}

// andList words a list: "run", "run and fit", "run, fit and compare".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
