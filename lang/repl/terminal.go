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
	size     func() (width, height int) // the terminal's, for fitting the candidate list
}

// IsTerminal says whether f is a terminal.
func IsTerminal(f *os.File) bool { return readline.IsTerminal(int(f.Fd())) }

// NewTerminal returns a Terminal on the process's standard input and
// output. Close it when done.
func NewTerminal() (*Terminal, error) {
	t := &Terminal{size: func() (int, int) {
		w, h, err := readline.GetSize(int(os.Stdout.Fd()))
		if err != nil {
			return 0, 0
		}
		return w, h
	}}
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
	if t.size != nil {
		w, h := t.size()
		out = fitCandidates(out, n, w, h)
	}
	return out, n
}

// fitCandidates keeps the candidates chzyer/readline can list below the
// prompt without scrolling it off the screen: its list takes rows of
// columns as wide as the widest candidate (with the word typed) plus one,
// in width-1 columns of the terminal, and moves the cursor back up by its
// rows afterwards, which a list taller than the screen breaks (the prompt
// has scrolled away, and what is typed next lands on the list's first
// line). The first screenful is kept, leaving the prompt's line and one
// more; typing more letters narrows the rest. An unknown size keeps all.
func fitCandidates(cands [][]rune, word, width, height int) [][]rune {
	if width <= 1 || height <= 0 || len(cands) < 2 {
		return cands
	}
	colWidth := 0
	for _, c := range cands {
		colWidth = max(colWidth, runewidth(c)+word+1)
	}
	cols := max((width-1)/colWidth, 1)
	rows := max(height-2, 1)
	if len(cands) <= rows*cols {
		return cands
	}
	return cands[:rows*cols]
}

// runewidth is the columns c takes: one per rune (the REPL's names are
// ASCII).
func runewidth(c []rune) int { return len(c) }

// Close restores the terminal.
func (t *Terminal) Close() error { return t.rl.Close() }
