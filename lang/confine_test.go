package lang

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// Scripts read files (load, hf_config) only inside the script's folder
// tree: not through "..", absolute paths, or symlinks that point out of
// it (os.Root refuses them); a symlink that stays inside works.
func TestFileReadsConfined(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "secret")
	tree := filepath.Join(base, "project")
	for _, d := range []string{outside, filepath.Join(tree, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", "gpt2.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(p, text string) {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "config.json"), string(config))
	write(filepath.Join(outside, "lib.star"), "x = 1\n")
	write(filepath.Join(tree, "sub", "config.json"), string(config))
	links := map[string]string{
		"out.json":    filepath.Join(outside, "config.json"),       // absolute target outside
		"out.star":    filepath.Join("..", "secret", "lib.star"),   // relative target outside
		"outdir":      outside,                                     // a folder outside
		"in.json":     filepath.Join("sub", "config.json"),         // stays inside
		"loop.json":   "loop.json",                                 // a link to itself
		"dangle.json": filepath.Join(outside, "missing", "x.json"), // nowhere
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(tree, name)); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	for _, tc := range []struct {
		name, src, err string
	}{
		{"symlink to a file outside", `m = hf_config("out.json")`, "out.json leaves the script's folder tree"},
		{"load through a symlink outside", `load("out.star", "x")`, "out.star leaves the script's folder tree"},
		{"a folder symlink outside", `m = hf_config("outdir/config.json")`, "outdir/config.json leaves the script's folder tree"},
		{"dot-dot", `m = hf_config("../secret/config.json")`, "path leaves the script's folder tree"},
		{"absolute", `m = hf_config("` + filepath.ToSlash(filepath.Join(outside, "config.json")) + `")`, "absolute path"},
		{"dangling symlink outside", `m = hf_config("dangle.json")`, "dangle.json"},
		{"symlink loop", `m = hf_config("loop.json")`, "loop.json"},
		{"symlink inside the tree", `m = hf_config("in.json")` + "\nprint(m.params)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			main := filepath.Join(tree, "main.star")
			write(main, tc.src+"\n")
			var out, errb bytes.Buffer
			in := New(Options{Stdout: &out})
			defer in.Close()
			_, err := in.RunFile(context.Background(), main)
			in.FormatError(&errb, err, false)
			if tc.err == "" {
				if err != nil || out.String() != "124439808\n" {
					t.Fatalf("got %q, error %s", out.String(), errb.String())
				}
				return
			}
			if err == nil || !strings.Contains(errb.String(), tc.err) {
				t.Fatalf("got error %q, want it to contain %q", errb.String(), tc.err)
			}
			if strings.Contains(errb.String(), "internal error") {
				t.Fatalf("internal error: %s", errb.String())
			}
		})
	}
}

// The predeclared names do no I/O beyond the confined file read: there is
// no network, process, environment or clock builtin. The list is
// explicit, so a new builtin must be looked at (and added here) before it
// passes.
func TestPredeclaredDoNoIO(t *testing.T) {
	// Builtins that read files, through State.ReadFile (the confined read).
	readers := map[string]bool{"hf_config": true}
	// Names that would mean I/O; none may exist, at top level or in a module.
	forbidden := []string{"open", "read", "write", "exec", "system", "shell", "run", "http", "fetch", "url",
		"request", "socket", "net", "download", "env", "getenv", "time", "now", "sleep", "os", "subprocess", "file"}
	in := New(Options{})
	var names []string
	for name, v := range in.Predeclared() {
		names = append(names, name)
		if m, ok := v.(starlark.HasAttrs); ok && (name == "json" || name == "math" || v.Type() == "module") {
			for _, a := range m.AttrNames() {
				names = append(names, name+"."+a)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		leaf := n[strings.LastIndex(n, ".")+1:]
		for _, f := range forbidden {
			if leaf == f || strings.HasPrefix(leaf, f+"_") || strings.HasSuffix(leaf, "_"+f) {
				t.Errorf("predeclared %s looks like I/O (%s)", n, f)
			}
		}
	}
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	for r := range readers {
		if !known[r] {
			t.Errorf("file reader %s is not predeclared any more: update this test", r)
		}
	}
	// Every builtin that reaches the file system does it through
	// State.ReadFile, which the interpreter confines; with ReadFile unset,
	// only the listed readers fail for want of file access.
	pre := in.Predeclared()
	thread := &starlark.Thread{Name: "no-files"}
	st := *in.State()
	st.ReadFile = nil
	st.Attach(thread)
	for r := range readers {
		_, err := starlark.Call(thread, pre[r], starlark.Tuple{starlark.String("config.json")}, nil)
		if err == nil || !strings.Contains(err.Error(), "file access is not available") {
			t.Errorf("%s without ReadFile: %v, want \"file access is not available\"", r, err)
		}
	}
}

// The packages scripts run through import nothing that reaches the
// network or starts processes, and only lang touches the file system (the
// confined os.Root of the script's tree): the guarantee behind "scripts
// cannot touch the network" (DESIGN.md section 5), checked on the imports
// rather than on builtin names.
func TestScriptPackagesImportNoIO(t *testing.T) {
	forbidden := func(path string) bool {
		return path == "net" || strings.HasPrefix(path, "net/") || path == "os/exec" || path == "syscall" ||
			path == "plugin" || path == "os/signal" || path == "io/ioutil"
	}
	for _, dir := range []string{".", "../builtins", "../sim", "../stdlib", "../plot", "../jsondoc"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if forbidden(path) || (path == "os" && dir != ".") {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
