package lang

import (
	"bytes"
	"context"
	"io/fs"
	"path"
	"strings"
	"testing"

	"go.starlark.net/syntax"

	"github.com/memsh/memsh/stdlib"
)

// TestStdlibModulesLoadPure loads every stdlib module and checks that it
// prints nothing at load time and exports something.
func TestStdlibModulesLoadPure(t *testing.T) {
	names, err := fs.Glob(stdlib.FS, "*.star")
	if err != nil || len(names) == 0 {
		t.Fatalf("stdlib modules: %v %v", names, err)
	}
	parts, err := fs.Glob(stdlib.FS, "*/*.star")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, parts...)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			var out bytes.Buffer
			in := New(Options{Stdout: &out, Files: tree()})
			thread, stop := in.NewThread(context.Background())
			defer stop()
			if err := in.openRoot("."); err != nil {
				t.Fatal(err)
			}
			g, err := in.load(thread, "@stdlib//"+n)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if len(g) == 0 {
				t.Error("module exports nothing")
			}
			if out.Len() != 0 {
				t.Errorf("module printed %q at load time", out.String())
			}
		})
	}
	ex, err := StdlibExports(stdlib.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ex {
		if e.Sig != e.Name && e.Doc == "" {
			t.Errorf("%s in %s has no docstring", e.Name, e.Module)
		}
	}
}

// TestStdlibPartsExported: every public function of a module's part
// (llm/*.star) but the shared helpers' file (common.star) is a name of a
// module, so a model added to a part cannot be left out of llm.star.
func TestStdlibPartsExported(t *testing.T) {
	ex, err := StdlibExports(stdlib.FS)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, e := range ex {
		exported[e.Name] = true
	}
	parts, err := fs.Glob(stdlib.FS, "*/*.star")
	if err != nil || len(parts) == 0 {
		t.Fatalf("stdlib parts: %v %v", parts, err)
	}
	for _, p := range parts {
		if path.Base(p) == "common.star" {
			continue
		}
		src, f, err := parseStdlib(stdlib.FS, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range f.Stmts {
			if s, ok := stmt.(*syntax.DefStmt); ok && !strings.HasPrefix(s.Name.Name, "_") && !exported[s.Name.Name] {
				t.Errorf("%s defines %s, which no stdlib module binds (%s)", p, s.Name.Name, defExport(p, src, s).Sig)
			}
		}
	}
}
