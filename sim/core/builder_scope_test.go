package core

import "testing"

// Scopes close in the order they opened, each giving back the module
// path before it, whether closed by defer or by a call; a scope of no
// name changes nothing; and a Builder reused for another lowering
// (keepBuilder) starts with no scope open.
func TestBuilderScopes(t *testing.T) {
	b := &Builder{}
	steps := []struct {
		open  string // "": close the latest
		close bool
		want  string
	}{
		{open: "layers.0", want: "layers.0"},
		{open: "self_attn", want: "layers.0.self_attn"},
		{open: "", want: "layers.0.self_attn"},
		{close: true, want: "layers.0.self_attn"}, // the nameless one
		{close: true, want: "layers.0"},
		{open: "mlp", want: "layers.0.mlp"},
		{open: "experts", want: "layers.0.mlp.experts"},
		{close: true, want: "layers.0.mlp"},
		{close: true, want: "layers.0"},
		{close: true, want: ""},
	}
	var open []func()
	for i, s := range steps {
		if s.close {
			open[len(open)-1]()
			open = open[:len(open)-1]
		} else {
			open = append(open, b.Scope(s.open))
		}
		if b.prefix != s.want {
			t.Fatalf("step %d: module path %q, want %q", i, b.prefix, s.want)
		}
	}
	func() {
		defer b.Scope("a")()
		defer b.Scope("b")()
		if b.prefix != "a.b" {
			t.Fatalf("deferred scopes: %q", b.prefix)
		}
	}()
	b.Scope("left open")
	var bufs ProgramBuffers
	bufs.keepBuilder(b)
	if got := bufs.builder(); got != b || len(got.scopes) != 0 || got.prefix != "" {
		t.Fatalf("a reused Builder has scopes %q, path %q", got.scopes, got.prefix)
	}
}
