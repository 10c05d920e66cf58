package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/stdlib"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Options configure a Session. The zero value is a plain session (pipes
// and tests): no banner, no colour, no history file.
type Options struct {
	// Interactive marks a session at a terminal: it prints the banner,
	// the :paste instructions and a newline when Ctrl-D ends it.
	Interactive bool
	// Banner is printed first when Interactive.
	Banner string
	// Color says whether the output accepts ANSI colour (errors and
	// values that render themselves).
	Color bool
	// Interrupt delivers Ctrl-C while a statement runs: the statement
	// stops and the session goes on. Nil means only the Run context
	// stops statements (and then the session).
	Interrupt <-chan os.Signal
	// History records each complete statement; nil keeps no history.
	History *History
	// Stdlib holds the @stdlib modules for :help and completion; nil
	// means the embedded stdlib.FS.
	Stdlib fs.FS
	// Preload is a script to run before the first prompt, whose globals
	// the session keeps (memsh repl FILE.star).
	Preload string
	// Limit, when set, limits each statement (and :load): it returns the
	// statement's context, which it cancels with a cause when the
	// statement passes a limit (memsh --max-memory), and its release.
	Limit func(context.Context) (context.Context, context.CancelFunc)
}

// completerSetter is a LineReader that offers Tab completion (Terminal).
type completerSetter interface {
	SetCompleter(func(text string) (cands []string, word string))
}

// Session is one REPL session: an interpreter, its global environment,
// and the input read so far.
type Session struct {
	in      *lang.Interpreter
	lr      LineReader
	out     io.Writer
	errOut  io.Writer
	opts    Options
	globals starlark.StringDict
	pending []string // lines of the statement being read
	chunks  int      // statements run so far, for chunk names
	quit    bool
	failed  bool          // a statement or command failed (ErrFailed)
	exports []lang.Export // stdlib exports, read on first use
}

// New returns a session over lr that runs statements with in, writing
// values to out and errors to errOut.
func New(in *lang.Interpreter, lr LineReader, out, errOut io.Writer, opts Options) *Session {
	if opts.Stdlib == nil {
		opts.Stdlib = stdlib.FS
	}
	if opts.History == nil {
		opts.History = &History{}
	}
	return &Session{in: in, lr: lr, out: out, errOut: errOut, opts: opts, globals: in.Globals()}
}

// ErrFailed is what a session that is not Interactive (a pipe, a file)
// returns at its end when a statement or command failed, so that memsh
// exits 1 as memsh run does; the errors were printed already.
var ErrFailed = errors.New("a statement failed")

// Run runs a session until Ctrl-D, the end of input or :quit (nil, or
// ErrFailed), or until ctx is done (ctx's error).
func Run(ctx context.Context, lr LineReader, out, errOut io.Writer, in *lang.Interpreter, opts Options) error {
	return New(in, lr, out, errOut, opts).Run(ctx)
}

// Globals returns the session's global environment (predeclared names
// included). Statements update it.
func (s *Session) Globals() starlark.StringDict { return s.globals }

// Run reads and runs statements until Ctrl-D, the end of input or :quit
// (nil, or ErrFailed when not Interactive and a statement failed), or
// until ctx is done (ctx's error).
func (s *Session) Run(ctx context.Context) error {
	err := s.run(ctx)
	if err == nil && s.failed && !s.opts.Interactive {
		return ErrFailed
	}
	return err
}

func (s *Session) run(ctx context.Context) error {
	if c, ok := s.lr.(completerSetter); ok {
		c.SetCompleter(s.CompleteLine)
		defer c.SetCompleter(nil)
	}
	for _, e := range s.opts.History.Entries() {
		s.lr.SaveHistory(e)
	}
	if s.opts.Interactive && s.opts.Banner != "" {
		fmt.Fprintln(s.out, s.opts.Banner)
	}
	if s.opts.Preload != "" {
		s.runFile(ctx, s.opts.Preload)
	}
	for !s.quit {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.step(ctx)
		if errors.Is(err, io.EOF) {
			if s.opts.Interactive {
				fmt.Fprintln(s.out)
			}
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
	return ctx.Err()
}

// step reads and runs one statement or :command.
func (s *Session) step(ctx context.Context) error {
	if len(s.pending) == 0 {
		line, err := s.lr.ReadLine(">>> ", "")
		switch {
		case errors.Is(err, ErrInterrupt):
			return nil
		case err != nil:
			return err
		}
		if name, arg, ok := commandLine(line); ok {
			s.record(line)
			return s.command(ctx, name, arg)
		}
		if name, arg, ok := s.pythonHabit(line); ok {
			s.record(line)
			return s.command(ctx, name, arg)
		}
		s.pending = splitLines(line)
		if len(s.pending) > 1 {
			// A recalled history entry is a whole statement: end it.
			s.pending = append(s.pending, "")
		}
	}
	for len(s.pending) > 0 {
		name := fmt.Sprintf("<stdin:%d>", s.chunks+1)
		i := 0 // lines of pending handed to the parser
		next := func() (string, error) {
			if i == len(s.pending) {
				if err := s.more(); err != nil {
					return "", err
				}
			}
			i++
			return s.pending[i-1], nil
		}
		f, used, readErr, perr := parseStatement(name, next) // input.go
		switch {
		case errors.Is(readErr, ErrInterrupt):
			s.pending = nil
			return nil
		case errors.Is(readErr, io.EOF):
			s.incomplete()
			return nil
		case readErr != nil:
			return readErr
		}
		text := strings.Join(s.pending[:used], "\n") + "\n"
		s.pending = s.pending[used:]
		if perr == nil && len(f.Stmts) == 0 {
			continue // a blank or comment line
		}
		s.chunks++
		s.record(text)
		s.in.AddSource(name, []byte(text))
		if perr != nil {
			s.pending = nil
			s.report(perr, false)
			return nil
		}
		s.exec(ctx, f)
		return nil
	}
	return nil
}

// more reads a continuation line of the statement in pending. At the
// end of input a statement whose last line is not blank ends as a blank
// line would end it; after a blank line more returns io.EOF (a bracket or
// string is still open).
func (s *Session) more() error {
	last := s.pending[len(s.pending)-1]
	line, err := s.lr.ReadLine("... ", nextIndent(last))
	switch {
	case errors.Is(err, io.EOF):
		if strings.TrimSpace(last) == "" {
			return io.EOF
		}
		line = ""
	case err != nil:
		return err
	}
	s.pending = append(s.pending, splitLines(line)...)
	return nil
}

// incomplete reports a statement cut short by the end of input.
func (s *Session) incomplete() {
	first := ""
	for _, l := range s.pending {
		if strings.TrimSpace(l) != "" {
			first = strings.TrimSpace(l)
			break
		}
	}
	s.pending = nil
	s.errorf("unexpected end of input: a bracket or string in %q is not closed", first)
}

// errorf reports a REPL error (not a statement's: report prints those).
func (s *Session) errorf(format string, args ...any) {
	s.failed = true
	fmt.Fprintf(s.errOut, "%s %s\n", s.errorLabel(), fmt.Sprintf(format, args...))
}

func (s *Session) errorLabel() string {
	return host.Paint(s.opts.Color, host.StyleError, "error:")
}

// record saves a complete statement or command to the history.
func (s *Session) record(entry string) {
	entry = strings.TrimRight(entry, "\n")
	if strings.TrimSpace(entry) == "" {
		return
	}
	if err := s.opts.History.Add(entry); err != nil {
		fmt.Fprintf(s.errOut, "memsh: %v (history is kept for this session only)\n", err)
		s.opts.History.path = ""
	}
	s.lr.SaveHistory(entry)
}

// exec runs a parsed statement: a sole expression shows its value and
// binds it to _; anything else updates the globals.
func (s *Session) exec(ctx context.Context, f *syntax.File) {
	ectx, interrupted, done := s.evalContext(ctx)
	defer done()
	if expr := soleExpr(f); expr != nil {
		v, err := s.in.EvalExpr(ectx, expr, s.globals)
		if err != nil {
			s.report(err, interrupted())
			return
		}
		s.show(v)
		return
	}
	if err := s.in.ExecChunk(ectx, f, s.globals); err != nil {
		s.report(err, interrupted())
	}
}

// show prints the value of an expression and binds it to _ (None is
// neither printed nor bound, as in Python). A builtins.Renderer (a
// report) renders itself, in colour when the output takes it.
func (s *Session) show(v starlark.Value) {
	if v == starlark.None {
		return
	}
	s.globals["_"] = v
	if r, ok := v.(host.Renderer); ok {
		if err := r.Render(s.out, s.opts.Color); err != nil {
			s.report(err, false)
		}
		return
	}
	fmt.Fprintln(s.out, v.String())
}

// soleExpr returns the expression of a chunk that is one expression
// statement, or nil.
func soleExpr(f *syntax.File) syntax.Expr {
	if len(f.Stmts) == 1 {
		if es, ok := f.Stmts[0].(*syntax.ExprStmt); ok {
			return es.X
		}
	}
	return nil
}

// evalContext returns the context for one statement: it is cancelled
// when Ctrl-C arrives on Options.Interrupt. interrupted says whether that
// happened; done releases the watcher.
func (s *Session) evalContext(ctx context.Context) (ectx context.Context, interrupted func() bool, done func()) {
	ectx, release := ctx, context.CancelFunc(func() {})
	if s.opts.Limit != nil {
		ectx, release = s.opts.Limit(ctx)
	}
	ectx, interrupted, stopWatch := s.interruptContext(ctx, ectx)
	return ectx, interrupted, func() {
		stopWatch()
		release()
	}
}

// interruptContext derives from ectx, a statement's context under ctx, the
// context that Ctrl-C on Options.Interrupt cancels; interrupted says
// whether Ctrl-C (or the end of ctx) stopped the statement.
func (s *Session) interruptContext(ctx, ectx context.Context) (context.Context, func() bool, func()) {
	var hit atomic.Bool
	if s.opts.Interrupt == nil {
		return ectx, func() bool { return ctx.Err() != nil }, func() {}
	}
	// Drop a Ctrl-C that arrived while nothing ran.
	for drained := false; !drained; {
		select {
		case <-s.opts.Interrupt:
		default:
			drained = true
		}
	}
	ectx, cancel := context.WithCancel(ectx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-s.opts.Interrupt:
			hit.Store(true)
			cancel()
		case <-stop:
		}
	}()
	return ectx, func() bool { return hit.Load() || ctx.Err() != nil }, func() {
		close(stop)
		cancel()
	}
}

// report prints err with the interpreter's formatter (excerpt, traceback,
// hint), or just "interrupted" after Ctrl-C.
func (s *Session) report(err error, interrupted bool) {
	s.failed = true
	if interrupted {
		fmt.Fprintln(s.errOut, "interrupted")
		return
	}
	s.in.FormatErrorIn(s.errOut, err, s.opts.Color, s.globals) // globals: did you mean
}

// runFile runs a script and keeps its globals (even after an error, the
// names bound before it).
func (s *Session) runFile(ctx context.Context, file string) ([]string, bool) {
	ectx, interrupted, done := s.evalContext(ctx)
	defer done()
	g, err := s.in.RunFile(ectx, file)
	var names []string
	for k, v := range g {
		s.globals[k] = v
		names = append(names, k)
	}
	if err != nil {
		s.report(err, interrupted())
		return names, false
	}
	return names, true
}

// stdlibExports returns the public names of the stdlib modules.
func (s *Session) stdlibExports() []lang.Export {
	if s.exports == nil {
		s.exports, _ = lang.StdlibExports(s.opts.Stdlib)
		if s.exports == nil {
			s.exports = []lang.Export{}
		}
	}
	return s.exports
}

// userBound says whether the global name was bound by the user: a new
// name, or a predeclared one given another value.
func (s *Session) userBound(name string) bool {
	v, ok := s.globals[name]
	if !ok {
		return false
	}
	p, pre := s.in.Predeclared()[name]
	if !pre {
		return true
	}
	return !sameValue(p, v)
}

// sameValue says whether x and y are equal; values that cannot be compared
// (an identity comparison of a type Go cannot compare) count as different.
func sameValue(x, y starlark.Value) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	eq, err := starlark.Equal(x, y)
	return err == nil && eq
}
