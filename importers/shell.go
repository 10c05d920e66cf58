package importers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// A job script is read by interpreting it as bash does (mvdan.cc/sh's
// interpreter), its variables, arrays, conditionals and ${1:-default}
// parameters evaluated, with no command run: every command is recorded
// and skipped, no file is read or written (every path exists: a name
// with an extension as a file, any other as a folder, so that both
// [ -f train.py ] and cd "$MEGATRON" pass; a file opens empty), and the launch of the training script (the
// command naming it) is captured: its arguments are the config. The
// shells a command starts on a string (bash -c STRING) or on its standard
// input (sbatch <<EOF) are read the same way.

const (
	// shellCalls bounds the commands a script may run before the reading
	// stops: a script that loops for ever is an error, not a hang.
	shellCalls = 100_000
	// shellTimeout is the backstop for loops without commands.
	shellTimeout = 5 * time.Second
)

// launchArgs interprets a job script and returns the arguments of the
// first command that runs the training script whose base name is script
// (pretrain_gpt.py), with the launcher's name.
func launchArgs(file string, data []byte, script string, getenv func(string) string) (args []string, launcher string, err error) {
	l, err := findLaunch(file, data, getenv, script, "torchrun ... "+script+" --num-layers ...", func(a []string) ([]string, string, bool) {
		for i, x := range a {
			if path.Base(x) == script {
				return a[i+1:], path.Base(a[0]), true
			}
		}
		return nil, "", false
	})
	if err != nil {
		return nil, "", err
	}
	return l.args, l.launcher, nil
}

// launch is the command of a job script that starts the training: its
// arguments after what names it, the launcher's name, the variables
// exported to it (NPROC_PER_NODE=8 swift sft ..., export MAX_PIXELS=...)
// beyond the interpreter's own, and its line.
type launch struct {
	args     []string
	launcher string
	env      map[string]string
	line     int
}

// baseEnv is the environment a script starts in: what a variable the
// script sets is told from.
var baseEnv = []string{"HOME=/home/user", "PWD=/job", "PATH=/usr/bin:/bin"}

// findLaunch interprets a job script and returns the first command match
// says launches the training (its arguments and the launcher's name);
// what names that command in errors, example shows one.
func findLaunch(file string, data []byte, getenv func(string) string, what, example string, match func(a []string) ([]string, string, bool)) (*launch, error) {
	prog, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(bytes.NewReader(data), file)
	if err != nil {
		var pe syntax.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: file, Line: int(pe.Pos.Line()), Msg: "memsh's bash reader (mvdan.cc/sh) cannot parse the script: " + pe.Text, Hint: shellParseHint}
		}
		return nil, &Error{File: file, Msg: "memsh's bash reader (mvdan.cc/sh) cannot parse the script: " + err.Error(), Hint: shellParseHint}
	}
	var found *launch
	other := "" // a trainer's launch of its own the script makes instead (otherLauncher)
	calls := 0
	env := slices.Clone(baseEnv)
	for _, k := range []string{"SLURM_NNODES", "SLURM_GPUS_ON_NODE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"} {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	// newRunner makes an interpreter with the job's environment and the
	// variables exported to it; a command running bash -c STRING (or sh
	// -c) has STRING read by another, which shares the count of commands,
	// the deadline and what was found (srun ... bash -c "${TRAINING_CMD}",
	// as NVIDIA's Slurm scripts launch the job), and so has a job script
	// handed to sbatch, bash or sh on its standard input (stdinScript).
	var newRunner func(exported []string) (*interp.Runner, error)
	newRunner = func(exported []string) (*interp.Runner, error) {
		return interp.New(
			interp.Env(expand.ListEnviron(append(append([]string(nil), env...), exported...)...)),
			interp.Dir("/"), // stat on the real root, which always exists; nothing is read there
			interp.StdIO(nil, io.Discard, io.Discard),
			interp.CallHandler(func(ctx context.Context, a []string) ([]string, error) {
				if calls++; calls > shellCalls {
					return nil, fmt.Errorf("more than %d commands", shellCalls)
				}
				if len(a) > 0 && (a[0] == "source" || a[0] == ".") {
					return []string{":"}, nil // no file is read: sourced scripts are not followed
				}
				if len(a) > 0 && a[0] == "read" {
					return readWithoutDelim(a), nil
				}
				return a, nil
			}),
			interp.ExecHandlers(func(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
				return func(ctx context.Context, a []string) error {
					if found == nil {
						if args, launcher, ok := match(a); ok {
							hc := interp.HandlerCtx(ctx)
							found = &launch{args: slices.Clone(args), launcher: launcher, env: exportedEnv(hc.Env), line: int(hc.Pos.Line())}
						}
					}
					if other == "" {
						other = otherLauncher(a)
					}
					if found != nil {
						return nil
					}
					if c, ok := shellString(a); ok {
						return runString(ctx, newRunner, c)
					}
					if stdinScript(a) {
						if c, ok := readStdin(ctx); ok {
							return runString(ctx, newRunner, c)
						}
					}
					if len(a) > 0 && a[0] == "expr" {
						if v, ok := exprValue(a[1:]); ok { // $(expr 16 / $nproc_per_node), as ms-swift's examples compute their accumulation
							_, err := fmt.Fprintln(interp.HandlerCtx(ctx).Stdout, v)
							return err
						}
					}
					return nil // nothing runs
				}
			}),
			interp.OpenHandler(func(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
				return nopFile{}, nil
			}),
			interp.StatHandler(func(ctx context.Context, name string, follow bool) (fs.FileInfo, error) {
				return fakeFile(path.Base(name)), nil
			}),
			interp.ReadDirHandler2(func(ctx context.Context, p string) ([]fs.DirEntry, error) { return nil, nil }),
			interp.AccessHandler(func(ctx context.Context, p string, mode interp.AccessMode) error { return nil }),
		)
	}
	runner, err := newRunner(nil)
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), shellTimeout)
	defer cancel()
	runErr := runner.Run(ctx, prog)
	if found != nil {
		return found, nil
	}
	if _, exited := interp.IsExitStatus(runErr); runErr != nil && !exited {
		return nil, &Error{noLaunch: true, stopped: true, File: file, Msg: "the script stopped before it launched " + what + ": " + runErr.Error(),
			Hint: "memsh reads the script as bash would, running no command"}
	}
	if other != "" {
		return nil, &Error{noLaunch: true, File: file, Msg: "the script runs " + other + ", not " + what,
			Hint: "memsh check reads ms-swift's `swift sft`, `swift pt` and `swift rlhf` with --trainer swift (or no --trainer); Megatron-SWIFT (megatron sft/pt/rlhf) is precision=\"megatron\" with parallel(tp=..., pp=..., ep=..., distributed_optimizer=True) in Starlark (docs/check.md)"}
	}
	return nil, &Error{noLaunch: true, File: file, Msg: "the script never launches " + what,
		Hint: "memsh check reads the command line of a script that runs " + what + " (" + example + ")"}
}

// readWithoutDelim is read's arguments without -d and its empty
// delimiter (read up to a NUL, which the interpreter's read does not
// take): `read -r -d "" cmd <<EOF`, as OpenRLHF's examples/scripts hold
// their command line (with the delimiter written as two single quotes), then reads the
// heredoc's first line, which is all of it when each line ends in a
// backslash (bash removes the backslash and the newline in a heredoc whose
// delimiter is unquoted, as those scripts' is).
func readWithoutDelim(a []string) []string {
	out := a[:1:1]
	for i := 1; i < len(a); i++ {
		switch {
		case a[i] == "-d" && i+1 < len(a) && a[i+1] == "":
			i++
		case a[i] == "-rd" && i+1 < len(a) && a[i+1] == "":
			out = append(out, "-r")
			i++
		default:
			out = append(out, a[i])
		}
	}
	return out
}

// exportedEnv is the variables of env exported to a command that the
// interpreter did not start with.
func exportedEnv(env expand.Environ) map[string]string {
	base := map[string]string{}
	for _, kv := range baseEnv {
		k, v, _ := strings.Cut(kv, "=")
		base[k] = v
	}
	out := map[string]string{}
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() && vr.Kind == expand.String {
			if v := vr.String(); base[name] != v {
				out[name] = v
			}
		}
		return true
	})
	return out
}

// exprValue is what expr(1) prints for integers joined by + - * / %
// (* / % before + -, each level from the left), as scripts compute a
// count ($(expr 32 / $nproc_per_node / $nnodes)); false for anything
// else, which prints nothing.
func exprValue(a []string) (int64, bool) {
	if len(a) < 3 || len(a)%2 == 0 {
		return 0, false
	}
	const bound, limit = 1 << 20, 1 << 40 // operands and products: no overflow
	operand := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= -bound && n <= bound
	}
	// terms of + and -, each a product of * / %
	sum, sign := int64(0), int64(1)
	term, ok := operand(a[0])
	if !ok {
		return 0, false
	}
	for i := 1; i < len(a); i += 2 {
		y, ok := operand(a[i+1])
		if !ok {
			return 0, false
		}
		switch a[i] {
		case "*":
			term *= y
		case "/", "%":
			if y == 0 {
				return 0, false
			}
			if a[i] == "/" {
				term /= y
			} else {
				term %= y
			}
		case "+", "-":
			sum += sign * term
			sign, term = 1, y
			if a[i] == "-" {
				sign = -1
			}
		default:
			return 0, false
		}
		if term < -limit || term > limit {
			return 0, false
		}
	}
	return sum + sign*term, true
}

// shellString is the STRING of a command that runs a shell on it
// (bash -c STRING, sh -c STRING, anywhere in the command: srun ... bash
// -x -c STRING), and whether a is one.
func shellString(a []string) (string, bool) {
	for i, x := range a {
		if b := path.Base(x); b != "bash" && b != "sh" {
			continue
		}
		for j := i + 1; j < len(a); j++ {
			f := a[j]
			switch {
			case f == "-c" || (strings.HasPrefix(f, "-") && !strings.HasPrefix(f, "--") && strings.HasSuffix(f, "c")):
				if j+1 < len(a) {
					return a[j+1], true
				}
				return "", false
			case !strings.HasPrefix(f, "-"):
				return "", false // bash FILE: a script memsh does not read
			}
		}
	}
	return "", false
}

// stdinScript says whether command a runs a shell script read from its
// standard input: sbatch handed no script file ("If no script is given,
// sbatch reads the script from standard input", sbatch(1): sbatch
// --nodes=2 <<EOF ... EOF), or bash or sh with no FILE (bash -s <<EOF).
// A word with a shell script's extension is sbatch's script file, which
// memsh does not read (sbatch's options with a separate value, -N 2,
// make any other word ambiguous).
func stdinScript(a []string) bool {
	if len(a) == 0 {
		return false
	}
	switch path.Base(a[0]) {
	case "sbatch":
		for _, x := range a[1:] {
			switch path.Ext(x) {
			case ".sh", ".bash", ".sbatch", ".slurm", ".job":
				return false
			}
		}
		return true
	case "bash", "sh":
		for _, f := range a[1:] {
			switch {
			case f == "-s" || strings.HasPrefix(f, "-") && !strings.HasPrefix(f, "--") && strings.Contains(f, "s"):
				return true // -s: the script is standard input, the words after it its arguments
			case !strings.HasPrefix(f, "-"):
				return false // bash FILE
			}
		}
		return true
	}
	return false
}

// stdinLimit bounds the script read from a command's standard input.
const stdinLimit = 1 << 20

// readStdin is what the command a handler runs would read on its
// standard input (a heredoc's text, after the outer shell expanded it
// unless its delimiter is quoted), and whether there is any.
func readStdin(ctx context.Context) (string, bool) {
	in := interp.HandlerCtx(ctx).Stdin
	if in == nil {
		return "", false
	}
	b, err := io.ReadAll(io.LimitReader(in, stdinLimit))
	if err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

// exportedVars are the variables the command a handler runs inherits
// (export X=...), as NAME=value.
func exportedVars(ctx context.Context) []string {
	var out []string
	interp.HandlerCtx(ctx).Env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.Kind == expand.String {
			out = append(out, name+"="+vr.String())
		}
		return true
	})
	return out
}

// runString reads STRING as the shell a command starts would, with the
// variables the command inherits (a parse error leaves it unread, as a
// command memsh skips).
func runString(ctx context.Context, newRunner func([]string) (*interp.Runner, error), c string) error {
	prog, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(c), "")
	if err != nil {
		return nil
	}
	r, err := newRunner(exportedVars(ctx))
	if err != nil {
		return err
	}
	if err := r.Run(ctx, prog); err != nil {
		if _, exited := interp.IsExitStatus(err); !exited {
			return err
		}
	}
	return nil
}

// swiftCommands are ms-swift's command-line entry points (its setup.py
// console_scripts: swift, megatron) and the subcommands that train
// (swift/cli/main.py and swift/cli/_megatron/main.py's ROUTE_MAPPING).
var swiftCommands = map[string]map[string]bool{
	"swift":    {"sft": true, "pt": true, "rlhf": true},
	"megatron": {"sft": true, "pt": true, "rlhf": true},
}

// otherLauncher names the ms-swift training command a is ("ms-swift's
// `megatron sft`"), "" for any other command.
func otherLauncher(a []string) string {
	if len(a) < 2 || !swiftCommands[path.Base(a[0])][a[1]] {
		return ""
	}
	return "ms-swift's `" + path.Base(a[0]) + " " + a[1] + "`"
}

// shellParseHint says what to do with a script mvdan.cc/sh does not
// parse: bash reads some words it refuses, such as one starting with
// [x] inside an array (Megatron-LM's examples/megatron_fsdp
// sbatch_mfsdp_deepseek_v3.sh, --moe-layer-freq [0]*3+[1]*58, which bash
// keeps as a word when no file matches it as a pattern).
const shellParseHint = "bash reads some words mvdan.cc/sh does not, such as one starting with [x] inside an array (--moe-layer-freq [0]*3+[1]*58): quote it ('[0]*3+[1]*58'), which bash reads the same"

// nopFile is every file a script opens: empty, and writes go nowhere.
type nopFile struct{}

func (nopFile) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopFile) Write(b []byte) (int, error) { return len(b), nil }
func (nopFile) Close() error                { return nil }

// fakeFile is every path a script stats, as it exists on the machine the
// job runs on: a file when its name has an extension, else a folder.
type fakeFile string

func (f fakeFile) Name() string { return string(f) }
func (fakeFile) Size() int64    { return 0 }
func (f fakeFile) Mode() fs.FileMode {
	if f.IsDir() {
		return fs.ModeDir | 0o755
	}
	return 0o755
}
func (fakeFile) ModTime() time.Time { return time.Time{} }
func (f fakeFile) IsDir() bool      { return path.Ext(string(f)) == "" }
func (fakeFile) Sys() any           { return nil }
