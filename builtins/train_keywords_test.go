package builtins

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// TestTrainKeywordsDeclaredOnce checks that every keyword of trainKeywords
// reaches each place that shows or takes it: train()'s signature and doc,
// the plan's attributes with the keyword's default, plan.replace() and
// sweep() axes.
func TestTrainKeywordsDeclaredOnce(t *testing.T) {
	sig, doc := trainSig(), trainDoc()
	pre := Predeclared()
	thread := &starlark.Thread{Name: "test"}
	(&host.State{}).Attach(thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "prelude.star",
		"m = model('m', linear(8, 8), input_dim = 8)\np = train(m)\n", pre)
	if err != nil {
		t.Fatal(err)
	}
	plan := globals["p"].(*Plan)
	attrs := plan.AttrNames()
	for _, k := range trainKeywords {
		t.Run(k.name, func(t *testing.T) {
			if k.doc == "" || !strings.Contains(doc, "- "+k.name+": "+k.doc) {
				t.Errorf("train()'s doc lacks %q", k.name)
			}
			if k.name == "model" {
				return
			}
			d := k.sig
			if d == "" {
				d = k.def.String()
			}
			if !strings.Contains(sig, ", "+k.name+"="+d) {
				t.Errorf("signature lacks %s=%s: %s", k.name, d, sig)
			}
			if !slices.Contains(attrs, k.name) {
				t.Errorf("plan has no attribute %s", k.name)
			}
			v, err := plan.Attr(k.name)
			if err != nil || v == nil || !same(v, k.def) {
				t.Errorf("plan.%s = %v (err %v), want the default %s", k.name, v, err, k.def)
			}
			// replace(name=default) and sweep(name=[default]) take the keyword.
			env := starlark.StringDict{"p": plan, "v": k.def}
			for k2, v2 := range pre {
				env[k2] = v2
			}
			for _, expr := range []string{"p.replace(" + k.name + " = v)", "sweep(p, " + k.name + " = [v])"} {
				if _, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", expr, env); err != nil {
					t.Errorf("%s: %v", expr, err)
				}
			}
		})
	}
}
