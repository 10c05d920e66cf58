package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memsh/memsh/lang"
	"github.com/rogpeppe/go-internal/diff"
	"go.starlark.net/syntax"
)

// What memsh test shows and which scripts a folder's tests are.

// goldenDiff is a failed test's diff: whole lines, as diff -u writes them
// (an anchored diff, github.com/rogpeppe/go-internal/diff), from the
// golden (-) to the output (+).
func goldenDiff(golden, want, got string) string {
	d := diff.Diff(golden, []byte(want), "output", []byte(got))
	// The first line repeats the two names ("diff golden output"); the
	// ---/+++ lines that follow say the same.
	s := string(d)
	if i := strings.IndexByte(s, '\n'); i >= 0 && strings.HasPrefix(s, "diff ") {
		s = s[i+1:]
	}
	return s
}

// maxParsedScript bounds how much of a script libraries reads to find
// its load() statements: scripts are small, and a larger file is a test
// (running it reports what is wrong).
const maxParsedScript = 4 << 20

// libraries returns the scripts among files that another of them loads
// (their libraries): with --update on a folder, these get no golden file
// unless they have one already. A load names a file relative to the
// loading script ("lib/plan.star") or to its folder ("//lib/plan.star");
// @stdlib modules are not files of the folder.
func libraries(files []string) map[string]bool {
	known := map[string]bool{}
	for _, f := range files {
		known[filepath.Clean(f)] = true
	}
	libs := map[string]bool{}
	for _, f := range files {
		for _, m := range loadsOf(f) {
			var p string
			switch {
			case strings.HasPrefix(m, "@"):
				continue
			case strings.HasPrefix(m, "//"):
				p = filepath.Join(filepath.Dir(f), filepath.FromSlash(m[2:]))
			default:
				p = filepath.Join(filepath.Dir(f), filepath.FromSlash(m))
			}
			if known[p] && p != filepath.Clean(f) {
				libs[p] = true
			}
		}
	}
	return libs
}

// loadsOf lists the modules file loads; nil when it cannot be read or
// parsed (running it will say why).
func loadsOf(file string) []string {
	fh, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer fh.Close()
	src, err := io.ReadAll(io.LimitReader(fh, maxParsedScript+1))
	if err != nil || len(src) > maxParsedScript {
		return nil
	}
	f, err := lang.FileOptions().Parse(file, src, 0)
	if err != nil {
		return nil
	}
	var out []string
	for _, st := range f.Stmts {
		if l, ok := st.(*syntax.LoadStmt); ok {
			if s, ok := l.Module.Value.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
