package repl

import (
	"strings"

	"github.com/memsh/memsh/lang"
	"go.starlark.net/syntax"
)

// parseStatement parses the first compound statement of the lines next
// returns (a def, for or if with its body, or one line of simple
// statements, open brackets and strings included) with the REPL dialect.
// The parser calls next only when it needs another line, so a statement
// is parsed once, in time linear in its length, however many lines it
// spans. It returns the statement, or the syntax error, and how many
// lines it used; readErr is next's error when the parser stopped for it
// (Ctrl-C, the end of input). A blank or comment-only line is a statement
// of its own with no Stmts.
//
// The parser reads one line past the end of a block to see that the
// block ended; that line is not counted in used, so the caller keeps it
// for the next statement.
func parseStatement(name string, next func() (string, error)) (f *syntax.File, used int, readErr, err error) {
	read := 0
	f, err = lang.REPLFileOptions().ParseCompoundStmt(name, func() ([]byte, error) {
		line, err := next()
		if err != nil {
			readErr = err
			return nil, err
		}
		read++
		return []byte(line + "\n"), nil
	})
	switch {
	case readErr != nil:
		return nil, 0, readErr, nil
	case err != nil:
		return nil, read, nil, err
	case len(f.Stmts) == 0:
		return f, 1, nil, nil
	}
	_, end := f.Stmts[len(f.Stmts)-1].Span()
	return f, min(max(int(end.Line), 1), read), nil, nil
}

// nextIndent is the indentation to pre-fill on the line after line: one
// level deeper after a line that ends with ':', the same inside a block,
// none after a blank line (which ends the block).
func nextIndent(line string) string {
	if strings.TrimSpace(line) == "" {
		return ""
	}
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	if strings.HasSuffix(strings.TrimRight(stripComment(line), " \t"), ":") {
		return indent + "    "
	}
	return indent
}

// stripComment drops a trailing # comment that is not inside a string.
func stripComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return line[:i]
		}
	}
	return line
}

// splitLines splits what a LineReader returned (a recalled history entry
// may span lines) into lines.
func splitLines(s string) []string {
	return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
}
