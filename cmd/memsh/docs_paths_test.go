package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docsRoot is the repository root, from this package's folder.
var docsRoot = filepath.Join("..", "..")

// docFiles are the user documents whose references the tests below hold
// to the tree: README.md and docs/*.md.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(docsRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, filepath.Join(docsRoot, "README.md"))
	docs := make(map[string]string, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(docsRoot, n)
		docs[filepath.ToSlash(rel)] = string(b)
	}
	if len(docs) < 10 {
		t.Fatalf("found %d documents; this test expects README.md and docs/*.md", len(docs))
	}
	return docs
}

// lineOf is the 1-based line of byte offset i in text.
func lineOf(text string, i int) int { return strings.Count(text[:i], "\n") + 1 }

// docPath is a path into this repository as the docs write one: a
// top-level folder of the tree, then a file name with an extension. What
// precedes it may not be a word character, '/' or '.', so the tail of a
// URL or of another project's path (".../docs/x.md") is not read as ours.
var docPath = regexp.MustCompile(`(?:^|[^\w/.-])((?:sim|examples|testdata|tools|cmd|builtins|lang|importers|stdlib|internal|jsondoc|snapshot|perfetto|plot|live|docs|\.ci)/[\w./*-]*\.(?:go|star|txtar|py|jsonl|json|yaml|yml|md|toml|sh|txt|csv|pickle))\b`)

// foreignPaths are paths the docs name in other projects' trees, with
// the project: they look like ours and are not. Each must still be named
// by some document (TestDocsPathsExist fails on one that no longer is).
var foreignPaths = map[string]string{
	"docs/GEMMA3N.md":                 "mistral.rs",
	"docs/performance-summary.md":     "NVIDIA-NeMo/Megatron-Bridge",
	"examples/llama-3/qlora.yml":      "axolotl-ai-cloud/axolotl",
	"examples/sc21/run_table_1.sh":    "NVIDIA/Megatron-LM",
	"internal/fuzz/worker.go":         "golang/go",
	"tools/autograd/derivatives.yaml": "pytorch/pytorch",
}

// TestDocsPathsExist checks that every file of this repository README.md
// and docs/*.md name (sim/..., examples/..., testdata/..., tools/...)
// exists, a glob matching at least one file, and that every bare Go file
// name in backquotes (`attention.go`) is some file of the tree: a renamed
// or deleted file leaves no dangling reference.
func TestDocsPathsExist(t *testing.T) {
	base := map[string]bool{}
	err := filepath.WalkDir(docsRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			base[d.Name()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bareGo := regexp.MustCompile("`(\\w+\\.go)`")
	named := map[string]bool{}
	n := 0
	docs := docFiles(t)
	files := make([]string, 0, len(docs))
	for f := range docs {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		text := docs[f]
		for _, m := range docPath.FindAllStringSubmatchIndex(text, -1) {
			p := text[m[2]:m[3]]
			named[p] = true
			n++
			if _, ok := foreignPaths[p]; ok {
				continue
			}
			matches, err := filepath.Glob(filepath.Join(docsRoot, filepath.FromSlash(p)))
			if err != nil || len(matches) == 0 {
				t.Errorf("%s:%d: names %s, which does not exist", f, lineOf(text, m[2]), p)
			}
		}
		for _, m := range bareGo.FindAllStringSubmatchIndex(text, -1) {
			name := text[m[2]:m[3]]
			n++
			if !base[name] {
				t.Errorf("%s:%d: names `%s`, no file of the tree", f, lineOf(text, m[2]), name)
			}
		}
	}
	for p, project := range foreignPaths {
		if !named[p] {
			t.Errorf("foreignPaths lists %s (%s), which no document names any more: drop it", p, project)
		}
	}
	if n < 100 {
		t.Fatalf("read %d paths from the docs; this test expects hundreds", n)
	}
}

// TestDocsTestNamesExist checks that every test, benchmark and fuzz
// target the docs name (`go test ./sim -run TestX -v`, "(TestY)") is a
// function of some _test.go file, or the prefix of one, as -run reads it.
func TestDocsTestNamesExist(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	var funcs []string
	err := filepath.WalkDir(docsRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			funcs = append(funcs, string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(funcs)
	exists := func(name string) bool {
		i := sort.SearchStrings(funcs, name)
		return i < len(funcs) && strings.HasPrefix(funcs[i], name)
	}
	named := regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z]\w*`)
	n := 0
	for f, text := range docFiles(t) {
		for _, m := range named.FindAllStringIndex(text, -1) {
			n++
			if name := text[m[0]:m[1]]; !exists(name) {
				t.Errorf("%s:%d: names %s, which no _test.go declares", f, lineOf(text, m[0]), name)
			}
		}
	}
	if n < 50 {
		t.Fatalf("read %d test names from the docs; this test expects many", n)
	}
}
