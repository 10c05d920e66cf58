package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/lang/repl"
)

// cmdRepl runs the REPL: memsh repl [FILE.star], or memsh alone. On a
// terminal it edits lines with readline and Ctrl-C stops the running
// statement; on a pipe it reads plain lines (no prompt) and Ctrl-C ends
// the session.
func (e *env) cmdRepl(operands []string) error {
	if len(operands) > 1 {
		return usagef("repl takes at most one script (got %d arguments)", len(operands))
	}
	opts := repl.Options{Color: useColor(e.color, e.stdout, e.getenv)}
	// Scripts read the files under the folder of the script given, else
	// under the working directory.
	root := "."
	if len(operands) == 1 {
		opts.Preload, root = operands[0], ""
	}
	in := lang.New(lang.Options{MaxSteps: e.maxSteps, Stdout: e.stdout, Color: opts.Color, AllowRead: e.reads.dirs, Root: root,
		MaxMemory: e.maxMemory.bytes})
	opts.Limit = e.memoryContext // memory.go: --max-memory for each statement
	defer in.Close()
	in.State().Progress = progressTo(e.stderr) // progress.go

	stdin := e.stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if f, ok := stdin.(*os.File); !ok || !repl.IsTerminal(f) {
		// Statements from a pipe or a file are not history: the history
		// file keeps what was typed.
		err := repl.Run(e.ctx, repl.NewPlainReader(e.ctx, stdin), e.stdout, e.stderr, in, opts)
		if errors.Is(err, repl.ErrFailed) {
			return errPrinted // exit 1, as memsh run
		}
		return err
	}
	h, err := repl.OpenHistory(repl.HistoryPath(e.getenv))
	if err != nil {
		fmt.Fprintf(e.stderr, "memsh: %v (history is kept for this session only)\n", err)
	}
	opts.History = h
	term, err := repl.NewTerminal()
	if err != nil {
		return err
	}
	defer term.Close()
	// At the terminal Ctrl-C stops a statement, not the session: the
	// session outlives the first interrupt that cancels e.ctx.
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt)
	defer signal.Stop(intr)
	opts.Interactive = true
	opts.Interrupt = intr
	opts.Banner = fmt.Sprintf("memsh %s — :help for help, Ctrl-D to exit", version)
	return repl.Run(context.WithoutCancel(e.ctx), term, e.stdout, e.stderr, in, opts)
}

// replInput says whether memsh alone should start the REPL: stdin is a
// terminal, a pipe or a file (not /dev/null or absent, which print the
// help).
func replInput(stdin io.Reader) bool {
	if stdin == nil {
		return false
	}
	f, ok := stdin.(*os.File)
	if !ok {
		return true
	}
	if repl.IsTerminal(f) {
		return true
	}
	fi, err := f.Stat()
	return err == nil && (fi.Mode()&os.ModeNamedPipe != 0 || fi.Mode().IsRegular())
}
