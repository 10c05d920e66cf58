package lang

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// tree builds an in-memory script folder from name/text pairs.
func tree(kv ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
	}
	return m
}

func run(t *testing.T, files fstest.MapFS, main string, opts Options) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	opts.Files, opts.Stdout = files, &out
	in := New(opts)
	defer in.Close()
	_, err := in.RunFile(context.Background(), main)
	in.FormatError(&errb, err, false)
	return out.String(), errb.String()
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  fstest.MapFS
		main   string
		opts   Options
		stdout string
		stderr string
	}{
		{
			name:   "print",
			files:  tree("main.star", "print('hello', 1 + 2)\n"),
			stdout: "hello 3\n",
		},
		{
			name:   "argv",
			files:  tree("main.star", "print(argv, type(argv))\n"),
			opts:   Options{Args: []string{"a", "b c"}},
			stdout: "[\"a\", \"b c\"] list\n",
		},
		{
			name:   "dialect: top-level for, if, reassignment, sets",
			files:  tree("main.star", "best = None\nfor n in [3, 1, 2]:\n    if best == None or n < best:\n        best = n\nprint(best, len(set([1, 1, 2])))\n"),
			stdout: "1 2\n",
		},
		{
			name:   "json and math",
			files:  tree("main.star", "print(json.encode({'gib': GiB}), math.ceil(1.5))\n"),
			stdout: "{\"gib\":1073741824} 2\n",
		},
		{
			name:   "load stdlib",
			files:  tree("main.star", "load('@stdlib//units.star', 'to_gib')\nprint(to_gib(gpu('H200').memory))\n"),
			stdout: "139.80072021484375\n", // the H200's 150,109,880,320 B as PyTorch sees it (measured, sim/testdata/cuda_h200)
		},
		{
			name: "load relative, nested folders, cached once",
			files: tree(
				"main.star", "load('lib/a.star', 'a')\nload('lib/b.star', 'b')\nprint(a, b)\n",
				"lib/a.star", "load('b.star', 'b')\nprint('a runs')\na = 'a+' + b\n",
				"lib/b.star", "print('b runs')\nb = 'b'\n",
			),
			stdout: "b runs\na runs\na+b b\n",
		},
		{
			name:   "load from the root with //",
			files:  tree("main.star", "load('sub/x.star', 'x')\nprint(x)\n", "sub/x.star", "load('//common.star', 'c')\nx = c\n", "common.star", "c = 7\n"),
			stdout: "7\n",
		},
		{
			name:  "runtime error in a loaded file",
			files: tree("main.star", "load('lib.star', 'make')\ng = make('H300')\n", "lib.star", "def make(name):\n    return gpu(name)\n"),
			stderr: `lib.star:2:15: error: unknown gpu "H300" (close matches: H200, B200)
    2 |     return gpu(name)
      |               ^
  traceback (most recent call last):
    main.star:2:9 in <toplevel>
    lib.star:2:15 in make
`,
		},
		{
			name:  "error at the top level of a loaded file",
			files: tree("main.star", "load('lib.star', 'x')\n", "lib.star", "x = 1 // 0\n"),
			stderr: `lib.star:1:7: error: floored division by zero
    1 | x = 1 // 0
      |       ^
  traceback (most recent call last):
    main.star:1:1 in <toplevel>
    lib.star:1:7 in <toplevel>
`,
		},
		{
			name:  "load cycle",
			files: tree("a.star", "load('b.star', 'y')\n", "b.star", "load('a.star', 'x')\ny = 1\n"),
			main:  "a.star",
			stderr: `b.star:1:1: error: cannot load a.star: cycle in load graph: a.star -> b.star -> a.star
    1 | load('a.star', 'x')
      | ^
  traceback (most recent call last):
    a.star:1:1 in <toplevel>
    b.star:1:1 in <toplevel>
`,
		},
		{
			name:  "syntax error in a loaded file",
			files: tree("main.star", "load('bad.star', 'y')\n", "bad.star", "y = (1,\nz = 2\n"),
			stderr: `bad.star:2:4: error: got '=', want ')'
    2 | z = 2
      |    ^
  loaded from:
    main.star:1:1 in <toplevel>
`,
		},
		{
			name:  "path leaving the folder tree",
			files: tree("main.star", "load('../x.star', 'y')\n"),
			stderr: `main.star:1:1: error: cannot load ../x.star: path leaves the script's folder tree (the current folder)
    1 | load('../x.star', 'y')
      | ^
  hint: scripts read only the files under their own folder; memsh --allow-read DIR lets them read DIR too
`,
		},
		{
			name:  "absolute path",
			files: tree("main.star", "load('/etc/x.star', 'y')\n"),
			stderr: "main.star:1:1: error: cannot load /etc/x.star: absolute path \"/etc/x.star\" not allowed: name files relative to the loading file\n    1 | load('/etc/x.star', 'y')\n      | ^\n" +
				"  hint: scripts read only the files under their own folder; memsh --allow-read DIR lets them read DIR too\n",
		},
		{
			name:   "unknown package",
			files:  tree("main.star", "load('@hub//x.star', 'y')\n"),
			stderr: "main.star:1:1: error: cannot load @hub//x.star: unknown package \"@hub\" (known: @stdlib)\n    1 | load('@hub//x.star', 'y')\n      | ^\n",
		},
		{
			name:   "missing file",
			files:  tree("main.star", "load('nope.star', 'y')\n"),
			stderr: "main.star:1:1: error: cannot load nope.star: no such file nope.star\n    1 | load('nope.star', 'y')\n      | ^\n",
		},
		{
			name:   "missing stdlib module",
			files:  tree("main.star", "load('@stdlib//nope.star', 'y')\n"),
			stderr: "main.star:1:1: error: cannot load @stdlib//nope.star: no module @stdlib//nope.star (stdlib has: @stdlib//llm.star, @stdlib//units.star)\n    1 | load('@stdlib//nope.star', 'y')\n      | ^\n",
		},
		{
			name:   "missing main script",
			files:  tree(),
			stderr: "error: cannot read main.star: no such file\n",
		},
		{
			name:  "resolve errors: all of them, with hints",
			files: tree("main.star", "x = true\ny = null\nprint(to_gib(GiB))\n"),
			stderr: `main.star:1:5: error: undefined: true
    1 | x = true
      |     ^
  hint: Starlark spells the booleans True and False: use True
main.star:2:5: error: undefined: null
    2 | y = null
      |     ^
  hint: Starlark's null value is None
main.star:3:7: error: undefined: to_gib
    3 | print(to_gib(GiB))
      |       ^
  hint: to_gib is in the stdlib: add load("@stdlib//units.star", "to_gib") at the top of the file
`,
		},
		{
			name:  "no while",
			files: tree("main.star", "x = 1\nwhile x:\n    x = 0\n"),
			stderr: `main.star:2:1: error: this Starlark dialect does not support while loops
    2 | while x:
      | ^
  hint: memsh has no while loops, so every script ends: loop over range(n) instead
`,
		},
		{
			name:  "no recursion",
			files: tree("main.star", "def f(n):\n    return f(n)\n\nf(1)\n"),
			stderr: `main.star:2:12: error: function f called recursively
    2 |     return f(n)
      |            ^
  traceback (most recent call last):
    main.star:4:2 in <toplevel>
    main.star:2:13 in f
    main.star:2:12 in f
  hint: memsh does not allow recursion: rewrite it as a loop
`,
		},
		{
			name:  "step limit",
			files: tree("main.star", "n = 0\nfor i in range(1000000000):\n    n += i\n"),
			opts:  Options{MaxSteps: 10000},
			stderr: `main.star:2:1: error: execution exceeded 10000 steps (use --max-steps to raise)
    2 | for i in range(1000000000):
      | ^
`,
		},
		{
			name:   "fail() and tabs keep the caret aligned",
			files:  tree("main.star", "def f():\n\tfail('bad plan')\n\nf()\n"),
			stderr: "main.star:2:6: error: bad plan\n    2 | \tfail('bad plan')\n      | \t    ^\n  traceback (most recent call last):\n    main.star:4:2 in <toplevel>\n    main.star:2:6 in f\n",
		},
		{
			// a fail() in the user's own library is shown where it fails; one
			// in @stdlib at the user's call (run_stdlib_llm.txtar)
			name:   "fail() in a user library",
			files:  tree("main.star", "load('lib.star', 'g')\ng(1)\n", "lib.star", "def g(n):\n    fail('bad size %d' % n)\n"),
			stderr: "lib.star:2:9: error: bad size 1\n    2 |     fail('bad size %d' % n)\n      |         ^\n  traceback (most recent call last):\n    main.star:2:2 in <toplevel>\n    lib.star:2:9 in g\n",
		},
		{
			name:  "frozen module globals",
			files: tree("main.star", "load('lib.star', 'xs')\nxs.append(1)\n", "lib.star", "xs = []\n"),
			stderr: `main.star:2:10: error: append: cannot append to frozen list
    2 | xs.append(1)
      |          ^
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			main := tc.main
			if main == "" {
				main = "main.star"
			}
			stdout, stderr := run(t, tc.files, main, tc.opts)
			if diff := cmp.Diff(tc.stdout, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.stderr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRootFromScriptFolder(t *testing.T) {
	files := tree("examples/main.star", "load('lib.star', 'x')\nprint(x)\n", "examples/lib.star", "x = 1 // 0\n")
	var errb bytes.Buffer
	in := New(Options{Files: files, Root: "."})
	_, err := in.RunFile(context.Background(), "examples/main.star")
	in.FormatError(&errb, err, false)
	want := `examples/lib.star:1:7: error: floored division by zero
    1 | x = 1 // 0
      |       ^
  traceback (most recent call last):
    examples/main.star:1:1 in <toplevel>
    examples/lib.star:1:7 in <toplevel>
`
	if diff := cmp.Diff(want, errb.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRunFileOnDisk(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/sub/main.star", "load('lib.star', 'x')\nprint(x)\n")
	writeFile(t, dir+"/sub/lib.star", "load('../outside.star', 'y')\nx = 1\n")
	writeFile(t, dir+"/outside.star", "y = 2\n")
	var out, errb bytes.Buffer
	in := New(Options{Stdout: &out})
	defer in.Close()
	_, err := in.RunFile(context.Background(), dir+"/sub/main.star")
	in.FormatError(&errb, err, false)
	if !strings.Contains(errb.String(), "error: cannot load ../outside.star: path leaves the script's folder tree ("+dir+"/sub)") {
		t.Errorf("got %q", errb.String())
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	in := New(Options{Files: tree("main.star", "for i in range(1000000000):\n    pass\n")})
	_, err := in.RunFile(ctx, "main.star")
	var errb bytes.Buffer
	in.FormatError(&errb, err, false)
	if !strings.HasPrefix(errb.String(), "main.star:") || !strings.Contains(errb.String(), "error: interrupted\n") {
		t.Fatalf("got %q", errb.String())
	}
}

func TestExecSourceREPL(t *testing.T) {
	var out bytes.Buffer
	in := New(Options{Stdout: &out, Files: tree("lib.star", "k = 3\n")})
	g := in.Globals()
	ctx := context.Background()
	for i, chunk := range []string{
		"load('@stdlib//units.star', 'to_gib')\n",
		"x = to_gib(2 * GiB)\n",
		"load('lib.star', 'k')\nx = x + k\n",
		"print(x)\n",
	} {
		if err := in.ExecSource(ctx, "<stdin:"+string(rune('1'+i))+">", []byte(chunk), g); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if out.String() != "5.0\n" {
		t.Fatalf("stdout %q", out.String())
	}
	err := in.ExecSource(ctx, "<stdin:9>", []byte("y = gpu('nope')\n"), g)
	var errb bytes.Buffer
	in.FormatError(&errb, err, false)
	want := "<stdin:9>:1:8: error: unknown gpu \"nope\" (known: V100-16GB, V100-32GB, A100-40GB, A100-80GB, H100-80GB, H100-PCIe, H100-NVL, H200, B200, MI300X, L40S, A6000, RTX-3090, RTX-4090)\n    1 | y = gpu('nope')\n      |        ^\n"
	if diff := cmp.Diff(want, errb.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStateReadFile(t *testing.T) {
	files := tree("main.star", "x = 1\n", "data/config.json", "{}\n")
	in := New(Options{Files: files})
	if _, err := in.RunFile(context.Background(), "main.star"); err != nil {
		t.Fatal(err)
	}
	st := in.State()
	if b, err := st.ReadFile("main.star", "data/config.json", 100, "config files"); err != nil || string(b) != "{}\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := st.ReadFile("main.star", "../secret", 100, "config files"); err == nil || !strings.Contains(err.Error(), "leaves the script's folder tree") {
		t.Fatalf("ReadFile(../secret) = %v", err)
	}
}

func TestFormatSimError(t *testing.T) {
	se := &units.Error{Origin: "models.star:40:5", Path: "attn", Msg: "tp=3 does not divide 32 heads", Hint: "tp must be one of 1, 2, 4, 8, 16, 32"}
	thread := &starlark.Thread{}
	(&host.State{}).Attach(thread)
	fail := starlark.NewBuiltin("simulate", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return nil, se
	})
	_, err := starlark.ExecFileOptions(FileOptions(), thread, "plan.star", "r = simulate()\n", starlark.StringDict{"simulate": fail})
	var b bytes.Buffer
	FormatError(&b, err, ErrorFormat{Sources: MapSource{"plan.star": []byte("r = simulate()\n")}})
	want := `plan.star:1:13: error: attn: tp=3 does not divide 32 heads
    1 | r = simulate()
      |             ^
  declared at models.star:40:5
  hint: tp must be one of 1, 2, 4, 8, 16, 32
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	b.Reset()
	FormatError(&b, errors.New("plain trouble"), ErrorFormat{Color: true})
	if b.String() != host.Paint(true, host.StyleError, "error:")+" plain trouble\n" {
		t.Errorf("colour plain: %q", b.String())
	}
}

func TestCleanMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Starlark computation cancelled: interrupted", "interrupted"},
		{"gpu: gpu: bad", "gpu: bad"},
		{"gpu: missing argument for name", "gpu: missing argument for name"},
		{"a b: a b: c", "a b: a b: c"},
	} {
		if got := cleanMessage(tc.in); got != tc.want {
			t.Errorf("cleanMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStdlibExports(t *testing.T) {
	ex, err := StdlibExports(tree("m.star", "\"\"\"Module.\"\"\"\n\ndef f(a, b = 2, *args, **kw):\n    \"\"\"Does f.\n\n    Args:\n      a: x.\n    \"\"\"\n    return a\n\ndef _private():\n    pass\n\nC = 3\n_D = 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Export{
		{Name: "C", Module: "@stdlib//m.star", Sig: "C"},
		{Name: "f", Module: "@stdlib//m.star", Sig: "f(a, b = 2, *args, **kw)", Doc: "Does f.\n\nArgs:\n  a: x."},
	}
	if diff := cmp.Diff(want, ex); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestStdlibExportsParts: a module's names bound again from its parts
// (a folder's files) take the parts' signatures and docstrings; the parts
// are no modules of their own, each read and parsed once however many
// names are bound from it; a name bound from a part that lacks it, or a
// part that does not parse, is an error naming the module.
func TestStdlibExportsParts(t *testing.T) {
	part := "def g(x):\n    \"\"\"Does g.\"\"\"\n    return x\n\ndef helper():\n    \"\"\"Helps.\"\"\"\n"
	for _, tc := range []struct {
		name, main, part string
		want             []Export
		err              string
	}{
		{"reexport", "load(\"p/a.star\", _g = \"g\")\ng = _g\nh = _g\n", part, []Export{
			{Name: "g", Module: "@stdlib//m.star", Sig: "g(x)", Doc: "Does g."},
			{Name: "h", Module: "@stdlib//m.star", Sig: "h(x)", Doc: "Does g."},
		}, ""},
		{"two names, two loads", "load(\"p/a.star\", _g = \"g\")\nload(\"@stdlib//p/a.star\", _h = \"helper\")\ng = _g\nhelper = _h\n", part, []Export{
			{Name: "g", Module: "@stdlib//m.star", Sig: "g(x)", Doc: "Does g."},
			{Name: "helper", Module: "@stdlib//m.star", Sig: "helper()", Doc: "Helps."},
		}, ""},
		{"absolute load", "load(\"@stdlib//p/a.star\", _g = \"g\")\ng = _g\n", part, []Export{
			{Name: "g", Module: "@stdlib//m.star", Sig: "g(x)", Doc: "Does g."},
		}, ""},
		{"missing", "load(\"p/a.star\", _k = \"k\")\nk = _k\n", part, nil, "@stdlib//m.star: k = _k: @stdlib//p/a.star defines no function k"},
		{"no part", "load(\"p/b.star\", _g = \"g\")\ng = _g\n", part, nil, "p/b.star"},
		{"bad part", "load(\"p/a.star\", _g = \"g\")\ng = _g\n", "def g(:\n", nil, "p/a.star:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := &countingFS{FS: tree("m.star", tc.main, "p/a.star", tc.part), opens: map[string]int{}}
			ex, err := StdlibExports(files)
			if n := files.opens["p/a.star"]; n > 1 {
				t.Errorf("p/a.star read %d times", n)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ex); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// countingFS counts the opens of each file.
type countingFS struct {
	fs.FS
	opens map[string]int
}

func (c *countingFS) Open(name string) (fs.File, error) {
	c.opens[name]++
	return c.FS.Open(name)
}

func TestDialect(t *testing.T) {
	o := FileOptions()
	if !o.TopLevelControl || !o.GlobalReassign || !o.Set || o.While || o.Recursion || o.LoadBindsGlobally {
		t.Errorf("FileOptions = %+v", o)
	}
	if !REPLFileOptions().LoadBindsGlobally {
		t.Error("REPLFileOptions does not bind loads globally")
	}
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
