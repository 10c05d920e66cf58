package builtins

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

func TestRegistryDocumented(t *testing.T) {
	seen := map[string]bool{}
	all := All()
	if len(all) == 0 {
		t.Fatal("no builtins")
	}
	for i, b := range all {
		if seen[b.Name] {
			t.Errorf("duplicate builtin %q", b.Name)
		}
		seen[b.Name] = true
		if i > 0 && all[i-1].Name > b.Name {
			t.Errorf("All() not sorted: %q before %q", all[i-1].Name, b.Name)
		}
		if strings.TrimSpace(b.Doc) == "" {
			t.Errorf("%s: no Doc", b.Name)
		}
		if b.Summary() == "" || strings.HasSuffix(b.Summary(), ",") {
			t.Errorf("%s: bad summary %q", b.Name, b.Summary())
		}
		if !strings.HasPrefix(b.Sig, b.Name) {
			t.Errorf("%s: Sig %q does not start with its name", b.Name, b.Sig)
		}
		if b.Fn != nil && b.Value != nil {
			t.Errorf("%s: both Fn and Value", b.Name)
		}
		if b.Fn != nil && !strings.HasPrefix(b.Sig, b.Name+"(") {
			t.Errorf("%s: function Sig %q lacks its parameter list", b.Name, b.Sig)
		}
		// A Sig reads as a Starlark call; "a"|"b" alternatives and "..." are allowed.
		sig := strings.NewReplacer("|", " or ", "...", "_").Replace(b.Sig)
		if _, err := (&syntax.FileOptions{}).ParseExpr("sig", sig, 0); err != nil {
			t.Errorf("%s: Sig %q does not parse: %v", b.Name, b.Sig, err)
		}
		got, ok := Lookup(b.Name)
		if !ok || got.Name != b.Name {
			t.Errorf("Lookup(%q) failed", b.Name)
		}
	}
	if _, ok := Lookup("no_such_builtin"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}

func TestPredeclaredCoversRegistry(t *testing.T) {
	d := Predeclared()
	for _, b := range All() {
		mod, member, dotted := strings.Cut(b.Name, ".")
		v, ok := d[mod]
		if !ok {
			t.Errorf("%s not predeclared", b.Name)
			continue
		}
		if dotted {
			m, ok := v.(*starlarkstruct.Module)
			if !ok || m.Members[member] == nil {
				t.Errorf("%s: not a member of module %s", b.Name, mod)
			}
		}
	}
	for _, name := range []string{"json", "math", "gpu", "fmt_bytes", "GiB", "bf16"} {
		if !d.Has(name) {
			t.Errorf("%s not predeclared", name)
		}
	}
	// Each call is fresh.
	e := Predeclared()
	delete(e, "gpu")
	if !d.Has("gpu") {
		t.Error("Predeclared returned a shared dict")
	}
}

func TestGuardRecoversPanics(t *testing.T) {
	fn := guard("boom", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		panic(errors.New("index out of range"))
	})
	_, err := starlark.Call(&starlark.Thread{}, starlark.NewBuiltin("boom", fn), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "internal error in boom: index out of range") {
		t.Fatalf("got %v", err)
	}
}

func TestStateOfUnset(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "memsh state not set") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	host.StateOf(&starlark.Thread{})
}
