package units

import (
	"fmt"
	"strconv"
	"strings"
)

// IntMsg is fmt.Sprintf(format, args...) for a message of integers: a
// format whose verbs are %d (and %%), one argument each, is written
// with strconv, without fmt's printer and the boxing of each argument
// (a search refuses tens of thousands of layouts, each with such a
// message: core's and nn's layout checks). Any other format, or a count
// of arguments that does not match, is fmt's (the same text, %!d(MISSING)
// and all).
func IntMsg(format string, args ...int64) string {
	var room [256]byte // written on the stack when it fits: one allocation, the string
	return string(AppendIntMsg(room[:0], format, args...))
}

// AppendIntMsg appends IntMsg(format, args...) to b.
func AppendIntMsg(b []byte, format string, args ...int64) []byte {
	start, next := len(b), 0
	for rest := format; rest != ""; {
		k := strings.IndexByte(rest, '%') // the text up to the next verb, copied whole
		if k < 0 {
			b = append(b, rest...)
			break
		}
		b = append(b, rest[:k]...)
		if k+1 == len(rest) {
			return append(b[:start], sprintf(format, args)...)
		}
		switch rest[k+1] {
		case '%':
			b = append(b, '%')
		case 'd':
			if next == len(args) {
				return append(b[:start], sprintf(format, args)...)
			}
			b = strconv.AppendInt(b, args[next], 10)
			next++
		default:
			return append(b[:start], sprintf(format, args)...)
		}
		rest = rest[k+2:]
	}
	if next != len(args) {
		return append(b[:start], sprintf(format, args)...)
	}
	return b
}

// sprintf is fmt.Sprintf over int64 arguments.
func sprintf(format string, args []int64) string {
	as := make([]any, len(args))
	for i, a := range args {
		as[i] = a
	}
	return fmt.Sprintf(format, as...)
}
