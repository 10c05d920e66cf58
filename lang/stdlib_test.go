package lang

import (
	"bytes"
	"context"
	"io/fs"
	"testing"

	"github.com/memsh/memsh/stdlib"
)

// TestStdlibModulesLoadPure loads every stdlib module and checks that it
// prints nothing at load time and exports something.
func TestStdlibModulesLoadPure(t *testing.T) {
	names, err := fs.Glob(stdlib.FS, "*.star")
	if err != nil || len(names) == 0 {
		t.Fatalf("stdlib modules: %v %v", names, err)
	}
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
