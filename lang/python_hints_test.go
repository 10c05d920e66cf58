package lang

import (
	"strings"
	"testing"
)

// TestPythonHabitHints checks that a script written as Python would
// write it gets a hint that says what Starlark writes instead, and that
// the hinted form runs.
func TestPythonHabitHints(t *testing.T) {
	for _, tc := range []struct {
		script, hint, instead string
	}{
		{`x = 3` + "\n" + `print(f"x is {x}")`, "no f-strings", `x = 3` + "\n" + `print("x is %s" % x)`},
		{`print("a" "b")`, "does not join adjacent strings", `print("a" + "b")`},
		{`print(sum([1, 2]))`, "no sum()", "total = 0\nfor x in [1, 2]:\n    total += x\nprint(total)"},
		{`print(round(2.567, 1))`, "math.round(x)", `print(math.round(2.567), format(2.567, ".2f"))`},
		{`print(pow(2, 10))`, "math.pow(x, y)", `print(math.pow(2, 10), 1 << 10)`},
		{`print(divmod(7, 2))`, "x // y and x % y", `print(7 // 2, 7 % 2)`},
		{`print(isinstance(1, int))`, `type(x) == "int"`, `print(type(1) == "int")`},
		{`exit()`, `fail("why")`, ``},
		{`help(train)`, "memsh doc NAME", ``},
		{`import math`, "no import", `load("@stdlib//units.star", "to_gib")`},
		{`print(None is None)`, "no 'is'", `print(None == None)`},
		{`print(2 ** 10)`, "no ** operator", `print(math.pow(2, 10))`},
		{"class A:\n    pass\n", "no classes", ``},
		{"try:\n    x = 1\nexcept:\n    x = 2\n", "no exceptions", ``},
		{`print("%.2f" % 2.345)`, "no width or precision", `print(format(2.345, ".2f"))`},
		{`print("%5d" % 3)`, "no width or precision", `print(format(3, "5d"))`},
		{`print("{:.2f}".format(2.345))`, "no width or precision", `print("{}".format(format(2.345, ".2f")))`},
	} {
		_, stderr := run(t, tree("main.star", tc.script+"\n"), "main.star", Options{})
		if !strings.Contains(stderr, "hint: ") || !strings.Contains(stderr, tc.hint) {
			t.Errorf("%q: stderr %q, want a hint with %q", tc.script, stderr, tc.hint)
		}
		if tc.instead != "" {
			if _, stderr := run(t, tree("main.star", tc.instead+"\n"), "main.star", Options{}); stderr != "" {
				t.Errorf("%q, what the hint says to write instead: %s", tc.instead, stderr)
			}
		}
	}
}
