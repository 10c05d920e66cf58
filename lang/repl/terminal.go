package repl

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/chzyer/readline"
)

// Terminal is the LineReader for an interactive terminal: line editing,
// history recall (Up, Ctrl-R) and Tab completion through chzyer/readline.
type Terminal struct {
	rl *readline.Instance

	mu       sync.Mutex
	complete func(string) ([]string, string)
}

// IsTerminal says whether f is a terminal.
func IsTerminal(f *os.File) bool { return readline.IsTerminal(int(f.Fd())) }

// NewTerminal returns a Terminal on the process's standard input and
// output. Close it when done.
func NewTerminal() (*Terminal, error) {
	t := &Terminal{}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 ">>> ",
		AutoComplete:           t,
		DisableAutoSaveHistory: true, // the core saves whole statements
		HistoryLimit:           10000,
		HistorySearchFold:      true,
		InterruptPrompt:        "^C",
		EOFPrompt:              "",
	})
	if err != nil {
		return nil, err
	}
	t.rl = rl
	return t, nil
}

// ReadLine implements LineReader.
func (t *Terminal) ReadLine(prompt, indent string) (string, error) {
	t.rl.SetPrompt(prompt)
	line, err := t.rl.ReadlineWithDefault(indent)
	switch {
	case errors.Is(err, readline.ErrInterrupt):
		return "", ErrInterrupt
	case errors.Is(err, io.EOF):
		return "", io.EOF
	}
	return line, err
}

// SaveHistory implements LineReader.
func (t *Terminal) SaveHistory(entry string) error { return t.rl.SaveHistory(entry) }

// SetCompleter sets the function Tab calls with the text before the
// cursor; it returns whole candidates and the word they replace.
func (t *Terminal) SetCompleter(f func(string) ([]string, string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.complete = f
}

// Do implements readline.AutoCompleter: it turns whole candidates into
// the suffixes readline inserts after the word being completed.
func (t *Terminal) Do(line []rune, pos int) ([][]rune, int) {
	t.mu.Lock()
	f := t.complete
	t.mu.Unlock()
	if f == nil {
		return nil, 0
	}
	cands, word := f(string(line[:pos]))
	n := len([]rune(word))
	var out [][]rune
	for _, c := range cands {
		rc := []rune(c)
		if len(rc) >= n {
			out = append(out, rc[n:])
		}
	}
	return out, n
}

// Close restores the terminal.
func (t *Terminal) Close() error { return t.rl.Close() }
