package lang

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Errors quote the user's text (a source line, a file name, a fail()
// message), which may hold anything: control characters that a terminal
// would obey (ESC sequences), invisible format characters (bidirectional
// overrides) or bytes that are not UTF-8. Those are written escaped, as
// \x1b, \u202e or \xff, so that an error shows what is there and never
// sends raw codes to the terminal.

// escapeRune returns how r, decoded from size bytes of s, is shown.
func escapeRune(s string, r rune, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf(`\x%02x`, s[0])
	case r == '\t' || unicode.IsPrint(r):
		return s[:size]
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// excerpt returns a source line as an error shows it, escaped, and the
// padding that puts a caret under column col (runes, 1-based): tabs are
// kept so that the caret lines up however the terminal expands them.
func excerpt(line string, col int) (shown, pad string) {
	var b, p strings.Builder
	for i, c := 0, 1; i < len(line); c++ {
		r, size := utf8.DecodeRuneInString(line[i:])
		e := escapeRune(line[i:], r, size)
		b.WriteString(e)
		if c < col {
			if r == '\t' {
				p.WriteByte('\t')
			} else {
				p.WriteString(strings.Repeat(" ", utf8.RuneCountInString(e)))
			}
		}
		i += size
	}
	return b.String(), p.String()
}

// escapeMessage escapes an error message as excerpt does its line,
// keeping its newlines.
func escapeMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); {
		r, size := utf8.DecodeRuneInString(msg[i:])
		if r == '\n' {
			b.WriteByte('\n')
		} else {
			b.WriteString(escapeRune(msg[i:], r, size))
		}
		i += size
	}
	return b.String()
}
