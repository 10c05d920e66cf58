package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/importers"
	"github.com/memsh/memsh/jsondoc"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// Exit codes of memsh check.
const (
	exitCheckFits    = 0 // fits with the headroom asked
	exitCheckNoFit   = 1 // does not fit, or not with the headroom
	exitCheckInvalid = 2 // a usage or config error: nothing was decided
)

// maxConfigBytes bounds the trainer config memsh check reads.
const maxConfigBytes = 4 << 20

// checkFlags are memsh check's own flags (with fit's --gpu, --seq,
// --gpus and --top).
type checkFlags struct {
	model    string
	nodes    int64
	headroom headroomFlag
	emitStar bool
	trainer  string
	function string // --config: the function of a Python config module (torchtitan's)
}

// headroomFlag is --headroom: "10%" or 0.1, the fraction of the card the
// step must leave free.
type headroomFlag struct{ frac float64 }

func (h *headroomFlag) Set(s string) error {
	t := strings.TrimSpace(s)
	scale := 1.0
	if p, ok := strings.CutSuffix(t, "%"); ok {
		t, scale = strings.TrimSpace(p), 0.01
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f*scale < 0 || f*scale >= 1 {
		return fmt.Errorf("want a fraction of the card below 100%%, e.g. 10%% or 0.1 (got %q)", s)
	}
	h.frac = f * scale
	return nil
}

func (h *headroomFlag) String() string { return strconv.FormatFloat(h.frac*100, 'g', 4, 64) + "%" }

// checkError is a config memsh check cannot turn into a plan: exit 2.
type checkError struct{ err error }

func (e *checkError) Error() string { return e.err.Error() }

// cmdCheck is memsh check CONFIG [key=value ...] [--model CONFIG.json]
// [--seq N] [--gpu NAME] [--gpus N] [--nodes N] [--headroom 10%]
// [--top N] [--trainer NAME] [--emit-star] [--json]: it imports a
// trainer's config into a plan script (package importers), runs it like
// memsh fit runs fit.star, and exits 0 when the step fits with the
// headroom asked, 1 when it does not, 2 when the config or the command
// line is wrong.
func (e *env) cmdCheck(operands []string) error {
	operands, err := parseInterspersed(e.flags(), operands)
	if err != nil {
		return err
	}
	f, c := e.out.fit, e.out.gate
	switch {
	case len(operands) < 1:
		return usagef("check needs a trainer config: memsh check CONFIG [key=value ...] [--model CONFIG.json] [--seq N] [--gpu NAME] [--gpus N]")
	case f.gpus <= 0 || c.nodes <= 0:
		return usagef("check: --gpus and --nodes must be positive (got %d and %d)", f.gpus, c.nodes)
	case f.top < 0:
		return usagef("check: --top must be 0 (no advice) or more (got %d)", f.top)
	case f.seq < 0 || f.seq == 0 && e.out.set["seq"]: // 0 is --seq not given
		return usagef("check: --seq must be positive (got %d)", f.seq)
	case e.out.csv:
		return usagef("check takes --json, not --csv")
	case c.emitStar && e.out.json:
		return usagef("check: --emit-star prints the plan as a script, --json the verdict as JSON: give one of them")
	}
	if err := gpuFlag("check", f.gpu); err != nil {
		return err
	}
	config := filepath.ToSlash(operands[0])
	e.json.config = config
	for _, ov := range operands[1:] {
		if !strings.Contains(ov, "=") {
			return usagef("check: %q is not a key=value override of the config (one config per check)", ov)
		}
	}
	data, err := readConfig(operands[0])
	if err != nil {
		return usagef("check: %v", err)
	}
	dir, _ := path.Split(config)
	opts := importers.Options{
		Trainer: c.trainer, Function: c.function, Seq: f.seq, GPU: f.gpu, GPUs: f.gpus, Nodes: c.nodes, Top: f.top,
		Headroom: c.headroom.frac, Getenv: e.getenv, Overrides: operands[1:],
		ReadFile: func(name string) ([]byte, error) { // a file the config names (the Trainer's deepspeed or accelerate config), inside its folder
			return readNamedConfig(filepath.Dir(operands[0]), name)
		},
		FindModel: e.findModel(dir),
	}
	if abs, err := filepath.Abs(operands[0]); err == nil {
		opts.Path = filepath.ToSlash(abs)
	}
	if c.model != "" {
		if opts.Model, err = e.modelPath(dir, c.model); err != nil {
			return err
		}
		if opts.ModelData, err = readConfig(c.model); err != nil {
			return usagef("check: --model: %v", err)
		}
	}
	res, err := importers.Import(config, data, opts)
	if err != nil {
		return e.configError(err)
	}
	e.json.res = res
	if c.emitStar {
		_, err := io.WriteString(e.stdout, res.Script)
		return err
	}
	return e.runCheck(config, res)
}

// readConfig reads a regular file of at most maxConfigBytes.
func readConfig(name string) ([]byte, error) {
	fi, err := os.Stat(name) // before opening: opening a FIFO waits for a writer
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, unwrapPath(err))
	}
	if err := checkConfigMode(name, fi); err != nil {
		return nil, err
	}
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, unwrapPath(err))
	}
	return readOpened(name, fh)
}

// readNamedConfig reads a file a config names, relative to the config's
// folder and confined to its tree (os.Root: no absolute path, no "..",
// no symlink out of it), as readConfig does.
func readNamedConfig(dir, name string) ([]byte, error) {
	if !filepath.IsLocal(name) {
		return nil, fmt.Errorf("%s: a file the config names must be inside the config's folder %s (no absolute path or ..)", name, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, unwrapPath(err))
	}
	defer root.Close()
	fi, err := root.Stat(name) // before opening, as readConfig
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, unwrapPath(err))
	}
	if err := checkConfigMode(name, fi); err != nil {
		return nil, err
	}
	fh, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, unwrapPath(err))
	}
	return readOpened(name, fh)
}

// readOpened reads fh, a regular file of at most maxConfigBytes, and
// closes it.
// checkConfigMode refuses what is not a regular file (a device, a FIFO, a
// folder), before the file is opened and again after.
func checkConfigMode(name string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", name, lang.FileKind(fi.Mode()))
	}
	return nil
}

func readOpened(name string, fh *os.File) ([]byte, error) {
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkConfigMode(name, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB: not a trainer config", name, maxConfigBytes>>20)
	}
	return data, nil
}

// modelPath is --model as the plan script reads it: a path from the
// config's folder, that folder's tree being what the script may read, or
// the file's own folder opened to reads as --allow-read would.
func (e *env) modelPath(dir, model string) (string, error) {
	fi, err := os.Stat(model)
	if err != nil {
		return "", usagef("check: --model: %v", unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return "", usagef("check: --model %s is not a regular file", model)
	}
	base := dir
	if base == "" {
		base = "."
	}
	rel, err := filepath.Rel(base, model)
	if err == nil && !strings.HasPrefix(filepath.ToSlash(rel), "../") && rel != ".." {
		return filepath.ToSlash(rel), nil
	}
	abs, err := filepath.Abs(model)
	if err != nil {
		return "", usagef("check: --model: %v", err)
	}
	e.reads.dirs = append(e.reads.dirs, filepath.Dir(abs))
	return filepath.ToSlash(abs), nil
}

// configError prints an importer's error with its hint: exit 2.
func (e *env) configError(err error) error {
	msg := err.Error()
	var ie *importers.Error
	if errors.As(err, &ie) && ie.Hint != "" {
		msg += "\n  hint: " + ie.Hint
	}
	fmt.Fprintf(e.stderr, "memsh check: %s\n", msg)
	return &checkError{fmt.Errorf("%w: %w", errPrinted, err)} // err for --json's verdict
}

// runCheck runs the imported script: the notes, the report and the
// advice, then the verdict, whose exit code the gate reads.
func (e *env) runCheck(config string, res *importers.Result) error {
	dir, _ := path.Split(config)
	sr := scriptRun{
		file: path.Join(dir, "memsh-check.star"), src: []byte(res.Script),
		out: e.stdout, color: useColor(e.color, e.stdout, e.getenv),
		errOut: e.stderr, errColor: useColor(e.color, e.stderr, e.getenv), plainErrors: true,
		errPreface: fmt.Sprintf("memsh check: %s: the plan memsh imported from it fails (memsh check %s --emit-star prints the plan):", config, config),
	}
	var report *host.Simulation
	keep := func(em host.Emitted) {
		if s, ok := em.Value.(host.Simulation); ok && report == nil {
			report = &s
		}
	}
	notes := e.stdout
	if e.out.json {
		sr.out, sr.color = e.stderr, sr.errColor
		lines := jsonLines{e.stdout}
		sr.emit = func(th *starlark.Thread, em host.Emitted) error { keep(em); return lines.emit(th, em) }
		notes = e.stderr
	} else {
		n := 0
		sr.emit = func(_ *starlark.Thread, em host.Emitted) error {
			keep(em)
			if n++; n > 1 {
				fmt.Fprintln(sr.out)
			}
			return builtins.PrintEmitted(sr.out, em, sr.color)
		}
	}
	printImportNotes(notes, config, res)
	if _, err := e.execScript(e.ctx, sr); err != nil {
		return &checkError{err}
	}
	if report == nil {
		return &checkError{fmt.Errorf("memsh check: the plan script emitted no report")}
	}
	r := (*report).SimReport()
	h := e.out.gate.headroom.frac
	free := float64(r.Headroom) / float64(r.Capacity)
	pass := r.Fits && free >= h
	verdict := fmt.Sprintf("%s of %s used, %.1f %% free", units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity), 100*free)
	switch {
	case pass:
		verdict = "fits: " + verdict
	case r.Fits:
		verdict = "fits, but not with the headroom asked: " + verdict
	case r.OOM != nil:
		a := r.OOM.Alloc
		verdict = fmt.Sprintf("does not fit: out of memory allocating %s (%s, in %s); needs %s of %s",
			units.FormatBytes(a.Bytes), a.Tensor, a.Phase, units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity))
	default:
		verdict = fmt.Sprintf("does not fit: needs %s of %s", units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity))
	}
	if h > 0 {
		verdict += fmt.Sprintf(" (--headroom %s)", e.out.gate.headroom.String())
	}
	code := exitCheckFits
	if !pass {
		code = exitCheckNoFit
	}
	if e.out.json {
		if err := writeCheckDoc(e.stdout, config, res, pass, h, free, code); err != nil {
			return err
		}
		e.json.written = true
	}
	fmt.Fprintf(notes, "\nmemsh check: %s: exit %d\n", verdict, code)
	if !pass {
		return errCheckNoFit
	}
	return nil
}

// errCheckNoFit is a step that does not fit: exit 1, nothing more printed.
var errCheckNoFit = errors.New("does not fit")

// printImportNotes says what the importer read and what it left out.
func printImportNotes(w io.Writer, config string, res *importers.Result) {
	fmt.Fprintf(w, "memsh check: %s (%s)\n", config, res.Trainer)
	if len(res.Unknown) > 0 {
		keys := make([]string, len(res.Unknown))
		for i, k := range res.Unknown {
			keys[i] = res.WithDidYouMean(k)
		}
		fmt.Fprintf(w, "  not understood, left out of the plan: %s\n", strings.Join(keys, ", "))
	}
	if res.ModelFrom != "" {
		fmt.Fprintf(w, "  model: its config.json from %s\n", res.ModelFrom)
	}
	for _, n := range res.NotModelled {
		fmt.Fprintf(w, "  understood, not modelled: %s\n", n)
	}
	fmt.Fprintln(w, "  (memsh check --emit-star prints the plan as a script)")
	fmt.Fprintln(w)
}

// writeCheckDoc writes the verdict as the last JSON line.
func writeCheckDoc(w io.Writer, config string, res *importers.Result, pass bool, asked, free float64, code int) error {
	doc := jsondoc.Doc{Version: jsondoc.Version, Kind: jsondoc.KindCheck, At: config, Check: &jsondoc.Check{
		Config: config, Trainer: res.Trainer, NotUnderstood: nonNil(res.Unknown), DidYouMean: res.DidYouMean, NotModelled: nonNil(res.NotModelled), ModelFrom: res.ModelFrom,
		Pass: pass, HeadroomAsked: asked, Free: &free, Exit: code,
	}}
	line, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (e *checkError) Unwrap() error { return e.err }

// gpuFlag refuses a --gpu the catalog does not have, before anything is
// read or run (the plan script's error came after the import's notes).
func gpuFlag(cmd, name string) error {
	if _, err := hw.LookupDevice(name); err != nil {
		return usagef("%s: --gpu: %v", cmd, err)
	}
	return nil
}
