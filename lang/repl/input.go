package repl

import (
	"errors"
	"strings"

	"github.com/memsh/memsh/lang"
	"go.starlark.net/syntax"
)

// errNeedMore is what the line feeder hands the parser when the lines
// typed so far run out: the statement goes on, so the REPL asks for
// another line.
var errNeedMore = errors.New("memsh repl: more input needed")

// parseStatement parses the first compound statement in lines (a def,
// for or if with its body, or one line of simple statements, open
// brackets and strings included) with the REPL dialect. It reports more
// when lines end before the statement does; otherwise it returns the
// statement, or the syntax error, and how many lines it used. A blank or
// comment-only line is a statement of its own with no Stmts.
//
// The parser reads one line past the end of a block to see that the
// block ended; that line is not counted in used, so the caller keeps it
// for the next statement.
func parseStatement(name string, lines []string) (f *syntax.File, used int, more bool, err error) {
	i := 0
	read := func() ([]byte, error) {
		if i == len(lines) {
			return nil, errNeedMore
		}
		i++
		return []byte(lines[i-1] + "\n"), nil
	}
	f, err = lang.REPLFileOptions().ParseCompoundStmt(name, read)
	if err != nil {
		var se syntax.Error
		if errors.As(err, &se) && se.Msg == errNeedMore.Error() {
			return nil, 0, true, nil
		}
		return nil, len(lines), false, err
	}
	if len(f.Stmts) == 0 {
		return f, 1, false, nil
	}
	_, end := f.Stmts[len(f.Stmts)-1].Span()
	used = min(max(int(end.Line), 1), len(lines))
	return f, used, false, nil
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
