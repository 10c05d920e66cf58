package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/builtins"
)

// TestReferenceCurrent checks that docs/reference.md is what memsh doc
// --markdown writes. Regenerate it with
// MEMSH_UPDATE=1 go test ./cmd/memsh -run TestReferenceCurrent.
func TestReferenceCurrent(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"doc", "--markdown"}, &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("memsh doc --markdown: exit %d\n%s", code, errb.String())
	}
	got := out.String()
	for _, b := range builtins.All() {
		if !strings.Contains(got, "\n### "+b.Name+"\n") {
			t.Errorf("reference lacks a section for %s", b.Name)
		}
	}
	path := filepath.Join("..", "..", "docs", "reference.md")
	if os.Getenv("MEMSH_UPDATE") != "" {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with MEMSH_UPDATE=1 go test ./cmd/memsh -run TestReferenceCurrent)", err)
	}
	if d := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("docs/reference.md is stale; regenerate it with MEMSH_UPDATE=1 go test ./cmd/memsh -run TestReferenceCurrent (-file +generated):\n%s", d)
	}
}

func TestMarkdownUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"doc", "--markdown", "gpu"}, &out, &errb, func(string) string { return "" }); code != exitUsage {
		t.Errorf("doc --markdown gpu: exit %d, want %d", code, exitUsage)
	}
	if got := errb.String(); !strings.Contains(got, "doc --markdown documents every name") {
		t.Errorf("stderr = %q", got)
	}
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"emit", "emit"},
		{"fmt_bytes", "fmt_bytes"},
		{"@stdlib//llm.star", "stdlibllmstar"},
		{"optim.adamw", "optimadamw"},
		{"Two Words", "two-words"},
	} {
		if got := anchor(tc.in); got != tc.want {
			t.Errorf("anchor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMarkdownEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10*4^r + 2 nodes", `10\*4^r + 2 nodes`},
		{"`a*b` and a*b", "`a*b` and a\\*b"},
		{"x <y> z", "x &lt;y> z"},
		{"  trimmed\n", "trimmed"},
	} {
		if got := mdParagraphs(tc.in); got != tc.want {
			t.Errorf("mdParagraphs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
