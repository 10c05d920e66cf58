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
	"examples/megatron/moe/moe.sh":    "modelscope/ms-swift",
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

// goldenLines are the lines of testdata/scripts' goldens, and the
// whole-line patterns (^...$) their stdout and stderr assertions match
// lines with.
func goldenLines(t *testing.T) (text string, patterns []*regexp.Regexp) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(docsRoot, "testdata", "scripts", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	assert := regexp.MustCompile(`(?m)^!? ?(?:stdout|stderr) '((?:[^']|'')*)'`)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
		for _, m := range assert.FindAllSubmatch(data, -1) {
			// Only a whole line's pattern: 'must be' would match any line.
			p := strings.ReplaceAll(string(m[1]), "''", "'")
			if !strings.HasPrefix(p, "^") || !strings.HasSuffix(p, "$") {
				continue
			}
			if re, err := regexp.Compile(p); err == nil {
				patterns = append(patterns, re)
			}
		}
	}
	return b.String(), patterns
}

// quotedAnnotation splits a trailing annotation off a quoted output line,
// the text after its last run of three or more spaces, the way
// docs/device-memory.md annotates print(r)'s rows on the right.
var quotedAnnotation = regexp.MustCompile(`^(.*\S)\s{3,}\S[^\t]*$`)

// TestDocsOutputsQuoted checks that the output docs/*.md quote as memsh
// prints it (a fence without a language; "..." stands for text left out,
// and an annotation may follow a line after three spaces) is in a
// reviewed golden of testdata/scripts, whole or matched by one of its
// stdout assertions. A fence marked text is an illustration, not checked
// (README.md's quotes are TestReadmeOutputsQuoted's).
func TestDocsOutputsQuoted(t *testing.T) {
	golden, patterns := goldenLines(t)
	inGolden := func(line string) bool {
		parts := strings.Split(line, "...")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if regexp.MustCompile("(?m)^" + strings.Join(parts, ".*") + "$").MatchString(golden) {
			return true
		}
		for _, re := range patterns {
			if re.MatchString(line) {
				return true
			}
		}
		return false
	}
	n := 0
	for f, text := range docFiles(t) {
		if f == "README.md" || f == "docs/reference.md" { // TestReadmeOutputsQuoted; generated by memsh doc
			continue
		}
		lines := strings.Split(text, "\n")
		for i := 0; i < len(lines); i++ {
			if lines[i] != "```" {
				if strings.HasPrefix(lines[i], "```") {
					for i++; i < len(lines) && lines[i] != "```"; i++ {
					}
				}
				continue
			}
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				l := lines[i]
				n++
				if inGolden(l) {
					continue
				}
				if m := quotedAnnotation.FindStringSubmatch(l); m != nil && inGolden(m[1]) {
					continue
				}
				t.Errorf("%s:%d: memsh prints no such line in testdata/scripts: %s", f, i+1, l)
			}
		}
	}
	if n == 0 {
		t.Fatal("the docs quote no output; this test expects some")
	}
}

// TestDocsKeywordsExist checks that every keyword the docs pass to a
// builtin, in a call written out in README.md or docs/*.md
// (`parallel(dp = 8, fsdp = True)`, `train(..., doc_tokens = 512)`), is
// one docs/reference.md documents for that builtin (TestReferenceCurrent
// holds the reference to the builtins): a renamed keyword leaves no
// example that fails when pasted. Calls with nested parentheses in their
// arguments are left out, as the pattern cannot split them.
func TestDocsKeywordsExist(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join(docsRoot, "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	heads := regexp.MustCompile(`\n### (\S+)\n`).FindAllStringSubmatchIndex(string(ref), -1)
	for i, h := range heads {
		end := len(ref)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		sections[string(ref[h[2]:h[3]])] = string(ref[h[1]:end])
	}
	call := regexp.MustCompile("\\b([a-z_0-9]+)\\(([^()`]*?)\\)")
	// A PyTorch snippet (a fence that runs .backward() or imports torch)
	// is Python, not memsh's Starlark: its calls are not builtins'.
	fence := regexp.MustCompile("(?s)```[a-z]*\\n.*?```")
	pytorch := regexp.MustCompile(`\.backward\(\)|import torch`)
	kw := regexp.MustCompile(`(?:^|,)\s*([a-z_][a-z_0-9]*)\s*=[^=]`)
	n := 0
	for f, text := range docFiles(t) {
		if f == "docs/reference.md" {
			continue
		}
		var skip [][]int
		for _, fm := range fence.FindAllStringIndex(text, -1) {
			if pytorch.MatchString(text[fm[0]:fm[1]]) {
				skip = append(skip, fm)
			}
		}
	calls:
		for _, m := range call.FindAllStringSubmatchIndex(text, -1) {
			for _, r := range skip {
				if m[0] >= r[0] && m[0] < r[1] {
					continue calls
				}
			}
			name := text[m[2]:m[3]]
			doc, ok := sections[name]
			if !ok {
				continue
			}
			for _, k := range kw.FindAllStringSubmatch(text[m[4]:m[5]], -1) {
				n++
				if !regexp.MustCompile(`\b` + k[1] + `\b`).MatchString(doc) {
					t.Errorf("%s:%d: %s(%s=...): docs/reference.md documents no keyword %s for %s", f, lineOf(text, m[0]), name, k[1], k[1], name)
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("read %d keywords from the docs' calls; this test expects hundreds", n)
	}
}
