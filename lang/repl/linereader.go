package repl

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
)

// LineReader is where the REPL gets its input, one line at a time. The
// core works over this interface so that the same code serves a terminal
// (Terminal, over chzyer/readline) and pipes or tests (PlainReader).
type LineReader interface {
	// ReadLine shows prompt, pre-fills the line with indent (the
	// indentation carried over from the line before) and returns the
	// line, indent included, without its newline. It returns
	// ErrInterrupt on Ctrl-C and io.EOF on Ctrl-D or at the end of the
	// input. A line may hold newlines (a recalled multi-line history
	// entry); the core splits it.
	ReadLine(prompt, indent string) (string, error)
	// SaveHistory offers entry, one complete statement, to the reader's
	// history recall. It does not write the history file (History does).
	SaveHistory(entry string) error
}

// ErrInterrupt is what a LineReader returns when the user types Ctrl-C at
// the prompt: the core drops the statement being typed.
var ErrInterrupt = errors.New("interrupt")

// PlainReader reads lines from a pipe or a file: no prompt, no
// indentation, no recall. It stops with the context's error when ctx is
// done, even while waiting for input.
type PlainReader struct {
	ctx   context.Context
	r     *bufio.Reader
	lines chan plainLine
}

type plainLine struct {
	text string
	err  error
}

// NewPlainReader returns a PlainReader over r.
func NewPlainReader(ctx context.Context, r io.Reader) *PlainReader {
	return &PlainReader{ctx: ctx, r: bufio.NewReader(r)}
}

// ReadLine returns the next line of input; prompt and indent are ignored.
func (p *PlainReader) ReadLine(prompt, indent string) (string, error) {
	if p.lines == nil {
		// Reading happens on a goroutine so that a cancelled context
		// ends a wait on a pipe that stays open.
		p.lines = make(chan plainLine)
		go p.loop()
	}
	select {
	case <-p.ctx.Done():
		return "", p.ctx.Err()
	case l, ok := <-p.lines:
		if !ok {
			return "", io.EOF
		}
		return l.text, l.err
	}
}

func (p *PlainReader) loop() {
	defer close(p.lines)
	for {
		s, err := p.r.ReadString('\n')
		if s != "" {
			s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
			select {
			case p.lines <- plainLine{text: s}:
			case <-p.ctx.Done():
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				select {
				case p.lines <- plainLine{err: err}:
				case <-p.ctx.Done():
				}
			}
			return
		}
	}
}

// SaveHistory does nothing: a pipe has no recall.
func (p *PlainReader) SaveHistory(string) error { return nil }
