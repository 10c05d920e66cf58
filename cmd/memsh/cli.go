package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/memsh/memsh/lang"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1 // a script error (printed once)
	exitUsage       = 2
	exitInterrupted = 130
)

const helpText = `memsh simulates the GPU memory of a training step from models and plans
written in Starlark.

Usage:
  memsh                           start the REPL (statements from a pipe run too)
  memsh run FILE.star [ARGS...]   run a script (ARGS reach it as argv)
  memsh repl [FILE.star]          run a script, then explore its globals in the REPL
  memsh test [DIR|FILE.star...]   compare each script's output with its golden file
  memsh plot FILE.star [ARGS...]  draw the memory timeline of the script's reports
  memsh fit CONFIG.json --seq N   will a Hugging Face model train on this GPU? the
                                  report and advise()'s top changes
  memsh compare SNAP.pickle FILE.star [ARGS...]
                                  line a measured memory snapshot up against
                                  the step the script simulates
  memsh check CONFIG [key=value...]
                                  will the job of this trainer config fit?
                                  (torchtune, torchtitan, HF/TRL, LLaMA-Factory,
                                  Axolotl, DeepSpeed, Megatron-LM, anemoi;
                                  docs/check.md)
                                  the report and advise()'s changes; exit 0
                                  fits, 1 not
  memsh doc [NAME]                list builtins and stdlib names, or document one
                                  (a builtin, a stdlib name, a keyword or a
                                  report field: memsh doc device_used)
  memsh version                   print the version (also --version, -V)
  memsh help                      print this help

Flags (before or after the command):
  --max-steps N                   stop a script after N Starlark steps
                                  (default 100000000)
  --timeout DURATION              stop a script (run, test, plot) after
                                  DURATION of wall-clock time, e.g. 30s
                                  (default 0: no limit)
  --max-memory SIZE               stop a script or REPL statement whose
                                  values pass SIZE, e.g. 8GiB (default: a
                                  quarter of the machine's memory; 0: none)
  --allow-read DIR                let scripts read (load, hf_config) the files
                                  under DIR too, besides their own folder tree
                                  (repeatable)
  --color auto|always|never       colour output (default auto: on a terminal,
                                  unless NO_COLOR is set)
  run --json, fit --json,
  check --json                    emitted values as JSON lines on stdout
                                  (docs/json.md); print() output to stderr
  compare --json                  the comparison as one JSON object
  run --csv                       emitted tables as CSV on stdout, for
                                  spreadsheets; print() output to stderr
  run --plot OUT.svg              also draw the memory timeline to OUT.svg
  run --snapshot OUT.pickle       also write the step as a PyTorch memory snapshot
  run --trace OUT.json            also write the step's time as a Perfetto trace
  test --update                   rewrite the golden files
  plot -o OUT                     write to OUT (default: stdout)
  plot --html                     an HTML page with the SVG and the tables
  plot -http ADDR                 serve a live page on ADDR (":8080" is
                                  localhost:8080): re-runs on save, shows what
                                  is alive under the pointer, a table row's
                                  timeline on click
  plot --report N|all             without emit(): the Nth report the script
                                  simulates, or all (default: the last)
  doc --markdown                  the whole reference as Markdown
  fit --gpu NAME                  the GPU (default H100-80GB)
  fit --seq N                     tokens per sequence (required)
  fit --batch N, --gpus N         micro-batch per GPU and data-parallel GPUs
                                  (default 1 and 1)
  fit --precision P, --top N      precision (default bf16-mixed) and the
                                  changes to list (default 5)
  fit --lora R                    LoRA adapters of rank R on every linear
                                  layer but lm_head, the model frozen
  fit --qlora R                   the same over a 4-bit base (bitsandbytes
                                  nf4, double quantization), in bf16 unless
                                  --precision says otherwise
  fit --targets LIST              the modules --lora and --qlora adapt, names
                                  or roles joined by commas (default
                                  all-linear; q_proj,v_proj)
  fit --checkpoint MODE           activation checkpointing: none (default),
                                  full, selective or op
  fit --images COUNTxHxW          a vision-language model's images per
                                  sample, in pixels (2x448x448)
  fit --videos COUNTxFxHxW        its videos per sample: frames sampled
                                  from each (2 a second) and their size
                                  (1x16x448x448)
  check --model CONFIG.json       the model's Hugging Face config.json (when
                                  the config names no model memsh knows or
                                  finds: a folder, the Hugging Face cache)
  check --seq N, --gpu NAME       as fit's; --seq replaces the config's
  check --gpus N, --nodes N       GPUs per node and nodes (default 1 and 1)
  check --headroom 10%            the share of the card the step must leave
                                  free to pass (default 0)
  check --top N                   advise()'s changes to list (default 5, 0 none)
  check --trainer NAME            the trainer, when the file does not say
  check --config FUNCTION         the function of a Python config module
                                  (torchtitan's config_registry.py) to read
  check --emit-star               print the plan script instead of running it

Exit status: 0 ok, 1 script error, 2 usage error, 130 interrupted;
memsh check: 0 fits (with the headroom), 1 does not, 2 usage or config error.
`

// Main runs memsh with the process's arguments and environment and
// returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// The first Ctrl-C cancels the script; restoring the default handler
	// lets a second one end a builtin that does not return.
	context.AfterFunc(ctx, stop)
	setGCPercent(os.Getenv) // the process's collector: gc.go
	return runStdin(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
}

// env is what a command needs from the process.
type env struct {
	ctx      context.Context
	stdin    io.Reader // nil: none (memsh alone prints the help)
	stdout   io.Writer
	stderr   io.Writer
	getenv   func(string) string
	maxSteps uint64
	timeout  time.Duration // --timeout: wall-clock limit of each script, 0 = none
	reads    readFlags     // --allow-read: more folders scripts may read
	// --max-memory: the heap a script may build; ram is the
	// machine's memory, of which the default is a quarter.
	maxMemory memoryFlag
	ram       func() int64
	color     string
	out       outputFlags
	command   string      // the command, once the flags before it are read
	json      jsonVerdict // check's and fit's last document under --json
}

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errPrinted says the error was already reported to the user.
var errPrinted = errors.New("error already printed")

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return runStdin(ctx, args, nil, stdout, stderr, getenv)
}

// runStdin is run with a standard input, for the REPL.
func runStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, ram: machineMemory}
	return e.exitCode(args)
}

// exitCode runs the command line args and returns the exit code.
func (e *env) exitCode(args []string) int {
	err := e.dispatch(args)
	code := e.report(err)
	if cmd := e.jsonVerdictCommand(args); cmd != "" && code != exitOK && !e.json.written {
		e.writeJSONError(cmd, err, code)
	}
	return code
}

// report prints err, the error dispatch returned, unless it was printed,
// and returns the exit code.
func (e *env) report(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "memsh: %s\nRun 'memsh help' for usage.\n", ue.msg)
		return exitUsage
	case e.ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, errCheckNoFit):
		return exitCheckNoFit
	case errors.As(err, new(*checkError)):
		if !errors.Is(err, errPrinted) {
			fmt.Fprintf(e.stderr, "memsh: %v\n", err)
		}
		return exitCheckInvalid
	case errors.Is(err, errPrinted):
		return exitError
	default:
		fmt.Fprintf(e.stderr, "memsh: %v\n", err)
		return exitError
	}
}

func (e *env) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("memsh", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Uint64Var(&e.maxSteps, "max-steps", e.maxSteps, "")
	fs.DurationVar(&e.timeout, "timeout", e.timeout, "")
	fs.StringVar(&e.color, "color", e.color, "")
	fs.Func("allow-read", "", e.reads.add)
	fs.Var(&e.maxMemory, "max-memory", "")
	e.out.register(fs)
	return fs
}

// parse reads flags up to the first operand and returns the rest.
func (e *env) parse(args []string) ([]string, error) {
	fs := e.flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, flag.ErrHelp
		}
		return nil, flagError(fs, args, err)
	}
	return fs.Args(), nil
}

func (e *env) dispatch(args []string) error {
	e.maxSteps, e.color = lang.DefaultMaxSteps, "auto"
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-V") {
		args = []string{"version"} // as most tools take it
	}
	rest, err := e.parse(args)
	if err == nil && len(rest) > 0 {
		e.command = rest[0]
		var more []string
		more, err = e.parse(rest[1:])
		rest = append([]string{rest[0]}, more...)
	}
	if errors.Is(err, flag.ErrHelp) || (err == nil && len(rest) == 0 && !replInput(e.stdin)) {
		fmt.Fprint(e.stdout, helpText)
		return nil
	}
	if err != nil {
		return err
	}
	switch e.color {
	case "auto", "always", "never":
	default:
		return usagef("invalid --color value %q (want auto, always or never)", e.color)
	}
	if e.maxSteps == 0 {
		return usagef("invalid --max-steps value 0 (want a positive number of steps)")
	}
	if err := e.checkTimeout(); err != nil {
		return err
	}
	if err := e.reads.check(); err != nil {
		return err
	}
	if !e.maxMemory.set {
		e.maxMemory.bytes = defaultMaxMemory(e.ram) // memory.go
	}
	if len(rest) == 0 {
		return e.cmdRepl(nil)
	}
	if err := e.out.check(rest[0]); err != nil {
		return err
	}
	switch cmd, operands := rest[0], rest[1:]; cmd {
	case "run":
		return e.cmdRun(operands)
	case "test":
		return e.cmdTest(operands)
	case "plot":
		return e.cmdPlot(operands)
	case "fit":
		return e.cmdFit(operands)
	case "compare":
		return e.cmdCompare(operands)
	case "check":
		return e.cmdCheck(operands)
	case "repl":
		return e.cmdRepl(operands)
	case "doc":
		return e.cmdDoc(operands)
	case "version":
		if len(operands) > 0 {
			return usagef("version takes no arguments (got %s)", strconv.Quote(operands[0]))
		}
		fmt.Fprintf(e.stdout, "memsh %s\n", version)
		return nil
	case "help":
		fmt.Fprint(e.stdout, helpText)
		return nil
	default:
		return usagef("unknown command %q (want run, repl, test, plot, fit, compare, check, doc, version or help)", cmd)
	}
}
