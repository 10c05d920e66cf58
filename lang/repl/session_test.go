package repl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/lang"
	"go.starlark.net/starlark"
)

// ctrlC in a fake input stands for Ctrl-C at the prompt.
const ctrlC = "\x03"

// fakeReader is a LineReader over canned lines that records what the core
// asked for.
type fakeReader struct {
	lines   []string
	asked   []string // prompt + "|" + indent, per ReadLine
	saved   []string
	onRead  func(line string) // called with each line handed out
	readErr error             // returned once the lines run out; io.EOF when nil
}

func (f *fakeReader) ReadLine(prompt, indent string) (string, error) {
	f.asked = append(f.asked, prompt+"|"+indent)
	if len(f.lines) == 0 {
		if f.readErr != nil {
			return "", f.readErr
		}
		return "", io.EOF
	}
	l := f.lines[0]
	f.lines = f.lines[1:]
	if l == ctrlC {
		return "", ErrInterrupt
	}
	if f.onRead != nil {
		f.onRead(l)
	}
	return l, nil
}

func (f *fakeReader) SaveHistory(e string) error {
	f.saved = append(f.saved, e)
	return nil
}

// session runs lines through a plain session with files as the current
// folder and returns stdout and stderr.
func session(t *testing.T, lines []string, files fstest.MapFS, opts Options) (string, string, *fakeReader) {
	t.Helper()
	var out, errb bytes.Buffer
	in := lang.New(lang.Options{Stdout: &out, Files: files, Root: "."})
	defer in.Close()
	fr := &fakeReader{lines: lines}
	// A session that printed an error ends with ErrFailed (memsh exits 1).
	err := Run(context.Background(), fr, &out, &errb, in, opts)
	if failed := errb.Len() > 0 && !opts.Interactive; !(err == nil && !failed || errors.Is(err, ErrFailed) && failed) {
		t.Fatalf("Run: %v with stderr %q; want ErrFailed exactly when an error was printed", err, errb.String())
	}
	return out.String(), errb.String(), fr
}

func TestSession(t *testing.T) {
	files := fstest.MapFS{
		"lib.star": {Data: []byte("answer = 42\ndef twice(x):\n    return 2 * x\n")},
		"bad.star": {Data: []byte("ok = 1\nboom = 1 // 0\n")},
	}
	for _, tc := range []struct {
		name     string
		in       []string
		out, err string
	}{
		{"expression prints and binds _", []string{"1 + 2", "_ * 2"}, "3\n6\n", ""},
		{"strings print quoted", []string{`"a" + "b"`}, "\"ab\"\n", ""},
		{"None is neither printed nor bound", []string{"7", "None", "_"}, "7\n7\n", ""},
		{"statements print nothing", []string{"x = 5", "x"}, "5\n", ""},
		{"print goes to stdout", []string{`print("hi")`}, "hi\n", ""},
		{"multi-line def", []string{"def f(x):", "    y = x * 2", "    return y", "", "f(21)"}, "42\n", ""},
		{"a block ends at an outdented line", []string{"def f():", "    return 1", "f()"}, "1\n", ""},
		{"if with else", []string{"if 1 > 2:", "    v = 1", "else:", "    v = 2", "", "v"}, "2\n", ""},
		{"open brackets continue", []string{"x = [1,", "  2,", "]", "x"}, "[1, 2]\n", ""},
		{"triple-quoted string continues", []string{`s = """a`, `b"""`, "s"}, "\"a\\nb\"\n", ""},
		{"two statements on a line", []string{"a = 1; b = 2", "a + b"}, "3\n", ""},
		{"comments and blank lines are skipped", []string{"# note", "", "3"}, "3\n", ""},
		{"top-level for", []string{"t = 0", "for i in range(4):", "    t += i", "", "t"}, "6\n", ""},
		{"a recalled multi-line entry is split", []string{"def g():\n    return 9\n", "g()"}, "9\n", ""},
		{"load binds globally", []string{`load("@stdlib//units.star", "to_gib")`, "to_gib(2 * GiB)"}, "2.0\n", ""},
		{"relative load", []string{`load("lib.star", "twice")`, "twice(4)"}, "8\n", ""},
		{"Ctrl-C drops the statement", []string{"def f():", ctrlC, "1"}, "1\n", ""},
		{"end of input ends a block", []string{"def f():", "    return 3"}, "", ""},
		{
			"a misspelt builtin: did you mean",
			[]string{"trian(1)"},
			"",
			"<stdin:1>:1:1: error: undefined: trian\n    1 | trian(1)\n      | ^\n  hint: did you mean \"train\"?\n",
		},
		{
			"a misspelt global of the session: did you mean",
			[]string{"batch_size = 8", "batch_sise * 2"},
			"",
			"<stdin:2>:1:1: error: undefined: batch_sise\n    1 | batch_sise * 2\n      | ^\n  hint: did you mean \"batch_size\"?\n",
		},
		{
			"error then the session goes on",
			[]string{"1 // 0", "2"},
			"2\n",
			"<stdin:1>:1:3: error: floored division by zero\n    1 | 1 // 0\n      |   ^\n",
		},
		{
			"error inside a function defined earlier",
			[]string{"def f(x):", "    return x // 0", "", "f(1)"},
			"",
			"<stdin:1>:2:14: error: floored division by zero\n" +
				"    2 |     return x // 0\n" +
				"      |              ^\n" +
				"  traceback (most recent call last):\n" +
				"    <stdin:2>:1:2 in <expr>\n" +
				"    <stdin:1>:2:14 in f\n",
		},
		{
			"syntax error",
			[]string{"x = = 1", "3"},
			"3\n",
			"<stdin:1>:1:5: error: got '=', want primary expression\n    1 | x = = 1\n      |     ^\n",
		},
		{
			"undefined name with a hint",
			[]string{"to_gib(1)"},
			"",
			"<stdin:1>:1:1: error: undefined: to_gib\n    1 | to_gib(1)\n      | ^\n" +
				"  hint: to_gib is in the stdlib: add load(\"@stdlib//units.star\", \"to_gib\") at the top of the file\n",
		},
		{
			"an unclosed bracket at the end of input",
			[]string{"x = [1,"},
			"",
			"error: unexpected end of input: a bracket or string in \"x = [1,\" is not closed\n",
		},
		{":vars lists only user names", []string{"b = 2", "a = [1]", "def f(x, y=1): pass", "", ":vars"},
			"a  list      [1]\nb  int       2\nf  function  f(x, y=1)\n", ""},
		{":type", []string{":type 1.5", ":type GiB", "x = {}", ":type x"}, "float\nint\ndict\n", ""},
		{":type error", []string{":type 1 // 0"}, "", "<stdin:1>:1:3: error: floored division by zero\n    1 | 1 // 0\n      |   ^\n"},
		{":reset forgets names", []string{"x = 1", ":reset", ":vars", "GiB"}, "forgot every name you defined\n1073741824\n", ""},
		{":load keeps globals", []string{":load lib.star", "twice(answer)"}, "loaded lib.star: answer, twice\n84\n", ""},
		{
			":load of a failing file keeps what ran",
			[]string{":load bad.star", "ok"},
			"1\n",
			"bad.star:2:10: error: floored division by zero\n    2 | boom = 1 // 0\n      |          ^\n",
		},
		{":paste keeps blank lines", []string{":paste", "def f():", "", "    return 5", ".", "f()"}, "5\n", ""},
		{":paste of one expression prints it", []string{":paste", "(1 +", "", "  2)", "."}, "3\n", ""},
		{":paste ends at the end of input", []string{":paste", "z = 3", "print(z)"}, "3\n", ""},
		{":quit stops", []string{"1", ":quit", "2"}, "1\n", ""},
		{":q is short for :quit", []string{":q", "2"}, "", ""},
		{"unknown command", []string{":hlep"}, "", "error: unknown command :hlep (did you mean :help?)\n"},
		{"ambiguous command", []string{":h"}, "", "error: unknown command :h (did you mean :help or :history?)\n"},
		{"far-off command", []string{":frobnicate"}, "", "error: unknown command :frobnicate (:help lists the commands)\n"},
		{":help of a builtin", []string{":help fmt_bytes"}, "", ""},
		{":help of a stdlib name", []string{":help to_gib"}, "", ""},
		{":help of a user function", []string{"def area(w, h=2):", `    """Returns w times h."""`, "    return w * h", "", ":help area"},
			"area(w, h=2)\n\nReturns w times h.\n", ""},
		{":help of a user function dedents its docstring", []string{"def f():", `    """Does f.`, "", "    Args:", "      none", `    """`, "", ":help f"},
			"f()\n\nDoes f.\n\nArgs:\n  none\n", ""},
		{":help of a loaded stdlib function", []string{`load("@stdlib//units.star", "to_gib")`, ":help to_gib"},
			"load(\"@stdlib//units.star\", \"to_gib\")\n\nto_gib(n)\n\nReturns n bytes in GiB (2**30) as a float.\n\nArgs:\n  n: a number of bytes.\n\nReturns:\n  n / GiB, a float.\n", ""},
		{":help of a command", []string{":help :paste"},
			":paste\n\nrun the lines up to a single '.' (or Ctrl-D), blank lines and all\n", ""},
		{"typo in :help", []string{":help fmt_byte"}, "", "error: no help for \"fmt_byte\" (did you mean fmt_bytes?)\n"},
		{":history", []string{"x = 1", "def f():", "    return x", "", ":history"},
			"1  x = 1\n2  def f():\n       return x\n3  :history\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, _ := session(t, tc.in, files, Options{})
			if strings.HasPrefix(tc.name, ":help of a") && tc.out == "" {
				if out == "" || errs != "" {
					t.Errorf("got stdout %q, stderr %q; want some help and no error", out, errs)
				}
				return
			}
			if d := cmp.Diff(tc.out, out); d != "" {
				t.Errorf("stdout (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.err, errs); d != "" {
				t.Errorf("stderr (-want +got):\n%s", d)
			}
		})
	}
}

func TestHelpDocuments(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"fmt_bytes", "fmt_bytes(n, decimal=False)\n\n"},
		{"to_gib", "load(\"@stdlib//units.star\", \"to_gib\")\n\nto_gib(n)\n\nReturns n bytes in GiB"},
		{"len", "len is a Starlark built-in"},
		{"", "Commands:\n  :help [NAME]"},
	} {
		out, errs, _ := session(t, []string{":help " + tc.name}, nil, Options{})
		if !strings.HasPrefix(out, tc.want) || errs != "" {
			t.Errorf(":help %s: got %q (stderr %q), want it to start with %q", tc.name, out, errs, tc.want)
		}
	}
	// The index lists each builtin and stdlib name.
	out, _, _ := session(t, []string{":help"}, nil, Options{})
	for _, want := range []string{"fmt_bytes", "@stdlib//units.star", "to_gib", ":paste"} {
		if !strings.Contains(out, want) {
			t.Errorf(":help lacks %q:\n%s", want, out)
		}
	}
}

func TestPromptsAndIndent(t *testing.T) {
	_, _, fr := session(t, []string{"def f(x):", "    if x:", "        return 1", "    return 2", "", "f(0)"}, nil, Options{})
	want := []string{
		">>> |",
		"... |    ",
		"... |        ",
		"... |        ",
		"... |    ",
		">>> |",
		">>> |", // the end of input
	}
	if d := cmp.Diff(want, fr.asked); d != "" {
		t.Errorf("prompts (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"def f(x):\n    if x:\n        return 1\n    return 2", "f(0)"}, fr.saved); d != "" {
		t.Errorf("history entries (-want +got):\n%s", d)
	}
}

func TestRecalledEntryIsComplete(t *testing.T) {
	out, _, fr := session(t, []string{"def g():\n    return 9", "g()"}, nil, Options{})
	if d := cmp.Diff([]string{">>> |", ">>> |", ">>> |"}, fr.asked); d != "" || out != "9\n" {
		t.Errorf("prompts (-want +got):\n%s\nstdout %q", d, out)
	}
}

func TestNextIndent(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"def f():", "    "},
		{"    for i in x:  # loop", "        "},
		{"    x = 1", "    "},
		{"x = {'a:'", ""},
		{`s = "#:"`, ""},
		{"   ", ""},
		{"\tif x:", "\t    "},
	} {
		if got := nextIndent(tc.line); got != tc.want {
			t.Errorf("nextIndent(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestInterruptStopsAStatement(t *testing.T) {
	var out, errb bytes.Buffer
	in := lang.New(lang.Options{Stdout: &out, MaxSteps: 1 << 62})
	defer in.Close()
	intr := make(chan os.Signal, 1)
	fr := &fakeReader{
		lines: []string{"def spin():", "    for i in range(1000000000):", "        pass", "", "spin()", "1"},
		onRead: func(line string) {
			if line == "spin()" {
				go func() {
					time.Sleep(100 * time.Millisecond)
					intr <- os.Interrupt
				}()
			}
		},
	}
	if err := Run(context.Background(), fr, &out, &errb, in, Options{Interrupt: intr}); !errors.Is(err, ErrFailed) {
		t.Fatalf("Run: %v, want ErrFailed (a statement was interrupted)", err)
	}
	if d := cmp.Diff("interrupted\n", errb.String()); d != "" {
		t.Errorf("stderr (-want +got):\n%s", d)
	}
	if d := cmp.Diff("1\n", out.String()); d != "" {
		t.Errorf("stdout (-want +got):\n%s", d)
	}
}

func TestCancelledContextEndsThePlainSession(t *testing.T) {
	var out, errb bytes.Buffer
	in := lang.New(lang.Options{Stdout: &out, MaxSteps: 1 << 62})
	defer in.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		io.WriteString(pw, "def spin():\n    for i in range(1000000000):\n        pass\n\nspin()\n")
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	err := Run(ctx, NewPlainReader(ctx, pr), &out, &errb, in, Options{})
	if err != context.Canceled {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if errb.String() != "interrupted\n" {
		t.Errorf("stderr %q, want \"interrupted\\n\"", errb.String())
	}
}

func TestHistoryFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state", "memsh", "history")
	h, err := OpenHistory(p)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _ = session(t, []string{"x = 1", "x = 1", "def f():", `    return "a\\b"`, "", ""}, nil, Options{History: h})
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// A repeated entry is kept once; newlines and backslashes are escaped.
	if d := cmp.Diff(`x = 1
def f():\n    return "a\\\\b"
`, string(raw)); d != "" {
		t.Errorf("history file (-want +got):\n%s", d)
	}
	h2, err := OpenHistory(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"x = 1", "def f():\n    return \"a\\\\b\""}, h2.Entries()); d != "" {
		t.Errorf("reloaded entries (-want +got):\n%s", d)
	}
	// A new session offers the old entries to the reader's recall.
	_, _, fr := session(t, nil, nil, Options{History: h2})
	if d := cmp.Diff(h2.Entries(), fr.saved); d != "" {
		t.Errorf("recall (-want +got):\n%s", d)
	}
}

func TestHistoryPath(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MEMSH_HISTFILE": "/h/file", "XDG_STATE_HOME": "/x", "HOME": "/home/u"}, "/h/file"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/home/u"}, "/x/memsh/history"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.local/state/memsh/history"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/memsh/history"},
		{map[string]string{}, ""},
	} {
		got := HistoryPath(func(k string) string { return tc.env[k] })
		if got != filepath.FromSlash(tc.want) {
			t.Errorf("HistoryPath(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestPreload(t *testing.T) {
	files := fstest.MapFS{"lib.star": {Data: []byte("answer = 42\n")}}
	out, errs, _ := session(t, []string{"answer + 1"}, files, Options{Preload: "lib.star"})
	if out != "43\n" || errs != "" {
		t.Errorf("got stdout %q, stderr %q; want \"43\\n\" and no error", out, errs)
	}
}

func TestInteractiveBannerAndExit(t *testing.T) {
	out, _, _ := session(t, []string{"1"}, nil, Options{Interactive: true, Banner: "memsh 0.1"})
	if d := cmp.Diff("memsh 0.1\n1\n\n", out); d != "" {
		t.Errorf("stdout (-want +got):\n%s", d)
	}
}

// table is a value that renders itself, as reports do.
type table struct{ starlark.Tuple }

func (table) Type() string   { return "table" }
func (table) String() string { return "table(...)" }
func (table) Render(w io.Writer, color bool) error {
	if color {
		_, err := io.WriteString(w, "\x1b[32mfits\x1b[0m\n")
		return err
	}
	_, err := io.WriteString(w, "fits\n")
	return err
}

func TestRendererShowsTables(t *testing.T) {
	for _, color := range []bool{false, true} {
		var out, errb bytes.Buffer
		in := lang.New(lang.Options{Stdout: &out})
		s := New(in, &fakeReader{lines: []string{"t", "[t]"}}, &out, &errb, Options{Color: color})
		s.Globals()["t"] = table{}
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := "fits\n[table(...)]\n"
		if color {
			want = "\x1b[32mfits\x1b[0m\n[table(...)]\n"
		}
		if d := cmp.Diff(want, out.String()); d != "" || errb.Len() > 0 {
			t.Errorf("color=%v: stdout (-want +got):\n%s\nstderr: %s", color, d, errb.String())
		}
		in.Close()
	}
}
