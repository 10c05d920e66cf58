package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/memsh/memsh/lang"
	"go.starlark.net/starlark"
)

// command is one :command of the REPL.
type command struct {
	name   string // without the colon
	args   string // "[NAME]", for :help
	help   string
	hidden bool // test hooks, left out of :help and completion
	run    func(s *Session, ctx context.Context, arg string) error
}

// commands is the table of :commands, in the order :help lists them.
func commands() []command {
	return []command{
		{name: "help", args: "[NAME]", help: "list commands and names, or document NAME", run: (*Session).cmdHelp},
		{name: "vars", help: "list the names you defined, with their types", run: (*Session).cmdVars},
		{name: "type", args: "EXPR", help: "show the type of EXPR's value", run: (*Session).cmdType},
		{name: "load", args: "FILE", help: "run a script and keep its globals", run: (*Session).cmdLoad},
		{name: "paste", help: "run the lines up to a single '.' (or Ctrl-D), blank lines and all", run: (*Session).cmdPaste},
		{name: "reset", help: "forget every name you defined", run: (*Session).cmdReset},
		{name: "history", help: "list the statements entered so far", run: (*Session).cmdHistory},
		{name: "quit", help: "leave the REPL (Ctrl-D also does)", run: (*Session).cmdQuit},
		{name: "complete", args: "TEXT", hidden: true, help: "print the completions of TEXT, one a line (a test hook)", run: (*Session).cmdComplete},
	}
}

// commandLine splits a line typed at the primary prompt into a :command
// name and its argument; ok is false when the line is Starlark.
func commandLine(line string) (name, arg string, ok bool) {
	t := strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(t, ":") {
		return "", "", false
	}
	t = t[1:]
	i := strings.IndexAny(t, " \t")
	if i < 0 {
		return t, "", true
	}
	return t[:i], strings.TrimLeft(t[i:], " \t"), true
}

// command runs :name arg. A name may be shortened to a unique prefix.
func (s *Session) command(ctx context.Context, name, arg string) error {
	var found []command
	for _, c := range commands() {
		if c.name == name {
			found = []command{c}
			break
		}
		if name != "" && strings.HasPrefix(c.name, name) && !c.hidden {
			found = append(found, c)
		}
	}
	if len(found) == 1 {
		return found[0].run(s, ctx, arg)
	}
	var names, near []string
	for _, c := range commands() {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	for _, c := range found {
		near = append(near, ":"+c.name)
	}
	if len(near) == 0 {
		for _, n := range nearest(name, names) {
			near = append(near, ":"+n)
		}
	}
	if len(near) > 0 {
		s.errorf("unknown command :%s (did you mean %s?)", name, orList(near))
	} else {
		s.errorf("unknown command :%s (:help lists the commands)", name)
	}
	return nil
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (s *Session) cmdVars(ctx context.Context, arg string) error {
	var names []string
	for k := range s.globals {
		if s.userBound(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	nw, tw := 0, 0
	for _, n := range names {
		nw, tw = max(nw, len(n)), max(tw, len(s.globals[n].Type()))
	}
	for _, n := range names {
		v := s.globals[n]
		fmt.Fprintf(s.out, "%-*s  %-*s  %s\n", nw, n, tw, v.Type(), summary(v, 60))
	}
	return nil
}

// summary is the start of v's text on one line, at most width runes; a
// function shows its signature.
func summary(v starlark.Value, width int) string {
	text := v.String()
	if fn, ok := v.(*starlark.Function); ok {
		text = funcSig(fn)
	}
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i] + " ..."
	}
	if r := []rune(text); len(r) > width {
		text = string(r[:width-3]) + "..."
	}
	return text
}

func (s *Session) cmdType(ctx context.Context, arg string) error {
	if strings.TrimSpace(arg) == "" {
		s.errorf(":type needs an expression, as in :type m.params")
		return nil
	}
	s.chunks++
	name := fmt.Sprintf("<stdin:%d>", s.chunks)
	src := arg + "\n"
	s.in.AddSource(name, []byte(src))
	expr, err := lang.REPLFileOptions().ParseExpr(name, src, 0)
	if err != nil {
		s.report(err, false)
		return nil
	}
	ectx, interrupted, done := s.evalContext(ctx)
	defer done()
	v, err := s.in.EvalExpr(ectx, expr, s.globals)
	if err != nil {
		s.report(err, interrupted())
		return nil
	}
	fmt.Fprintln(s.out, v.Type())
	return nil
}

func (s *Session) cmdLoad(ctx context.Context, arg string) error {
	file := strings.TrimSpace(arg)
	if file == "" {
		s.errorf(":load needs a file, as in :load plan.star")
		return nil
	}
	names, ok := s.runFile(ctx, file)
	if ok {
		sort.Strings(names)
		if len(names) == 0 {
			fmt.Fprintf(s.out, "loaded %s (it defines no names)\n", file)
		} else {
			fmt.Fprintf(s.out, "loaded %s: %s\n", file, strings.Join(names, ", "))
		}
	}
	return nil
}

// cmdPaste reads lines up to a line holding a single '.' (or the end of
// input) and runs them as one chunk, so blank lines inside a def are
// fine.
func (s *Session) cmdPaste(ctx context.Context, arg string) error {
	if s.opts.Interactive {
		fmt.Fprintln(s.out, "pasting: end with a line holding a single '.' or Ctrl-D; Ctrl-C cancels")
	}
	var lines []string
	for {
		line, err := s.lr.ReadLine("", "")
		if errors.Is(err, ErrInterrupt) {
			return nil
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) == "." {
			break
		}
		lines = append(lines, splitLines(line)...)
	}
	text := strings.Join(lines, "\n") + "\n"
	if strings.TrimSpace(text) == "" {
		return nil
	}
	s.chunks++
	name := fmt.Sprintf("<stdin:%d>", s.chunks)
	s.record(text)
	s.in.AddSource(name, []byte(text))
	f, err := lang.REPLFileOptions().Parse(name, text, 0)
	if err != nil {
		s.report(err, false)
		return nil
	}
	s.exec(ctx, f)
	return nil
}

func (s *Session) cmdReset(ctx context.Context, arg string) error {
	s.globals = s.in.Globals()
	fmt.Fprintln(s.out, "forgot every name you defined")
	return nil
}

func (s *Session) cmdHistory(ctx context.Context, arg string) error {
	entries := s.opts.History.Entries()
	width := len(fmt.Sprint(len(entries)))
	for i, e := range entries {
		lines := strings.Split(e, "\n")
		fmt.Fprintf(s.out, "%*d  %s\n", width, i+1, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(s.out, "%*s  %s\n", width, "", l)
		}
	}
	return nil
}

func (s *Session) cmdQuit(ctx context.Context, arg string) error {
	s.quit = true
	return nil
}

// cmdComplete prints what Tab would offer after arg: the test hook for
// completion.
func (s *Session) cmdComplete(ctx context.Context, arg string) error {
	cands, _ := s.Complete(arg)
	for _, c := range cands {
		fmt.Fprintln(s.out, c)
	}
	return nil
}
