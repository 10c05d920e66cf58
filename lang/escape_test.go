package lang

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Errors escape what a terminal would obey or not show: ESC sequences,
// other control characters, bidirectional overrides and bytes that are
// not UTF-8, in the excerpt (with the caret still under its column) and
// in the message.
func TestErrorsEscapeControlCharacters(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"binary garbage", "x = 1\n\x01\x1b[31mred\xff\n",
			"main.star:2:1: error: unexpected input character '\\x01'\n" +
				"    2 | \\x01\\x1b[31mred\\xff\n" +
				"      | ^\n"},
		{"caret after escapes", "s = \"\x1b[2J\" + 1\n",
			"main.star:1:12: error: unknown binary op: string + int\n" +
				"    1 | s = \"\\x1b[2J\" + 1\n" +
				"      |               ^\n"},
		{"fail() message", "fail(\"\\x1b]0;title\\x07 \\u202e done\")\n",
			"main.star:1:5: error: \\x1b]0;title\\x07 \\u202e done\n" +
				"    1 | fail(\"\\x1b]0;title\\x07 \\u202e done\")\n" +
				"      |     ^\n"},
		{"tabs kept", "if True:\n\tx = 1 // 0\n",
			"main.star:2:8: error: floored division by zero\n" +
				"    2 | \tx = 1 // 0\n" +
				"      | \t      ^\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := New(Options{Files: tree("main.star", tc.src)})
			_, err := in.RunFile(context.Background(), "main.star")
			var errb bytes.Buffer
			in.FormatError(&errb, err, false)
			if d := cmp.Diff(tc.want, errb.String()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
