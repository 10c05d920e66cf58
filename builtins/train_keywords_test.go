package builtins

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// TestTrainKeywordsDeclaredOnce checks that every keyword of trainKeywords
// reaches each place that shows or takes it: train()'s signature and doc,
// the plan's attributes with the keyword's default, plan.replace() and
// sweep() axes.
func TestTrainKeywordsDeclaredOnce(t *testing.T) {
	sig, doc := plans.TrainSig(), plans.TrainDoc()
	pre := Predeclared()
	thread := &starlark.Thread{Name: "test"}
	(&host.State{}).Attach(thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "prelude.star",
		"m = model('m', linear(8, 8), input_dim = 8)\np = train(m)\n", pre)
	if err != nil {
		t.Fatal(err)
	}
	plan := globals["p"].(*plans.Plan)
	attrs := plan.AttrNames()
	for _, k := range plans.TrainKeywords {
		t.Run(k.Name, func(t *testing.T) {
			if k.Doc == "" || !strings.Contains(doc, "- "+k.Name+": "+k.Doc) {
				t.Errorf("train()'s doc lacks %q", k.Name)
			}
			if k.Name == "model" {
				return
			}
			d := k.Sig
			if d == "" {
				d = k.Def.String()
			}
			if !strings.Contains(sig, ", "+k.Name+"="+d) {
				t.Errorf("signature lacks %s=%s: %s", k.Name, d, sig)
			}
			if !slices.Contains(attrs, k.Name) {
				t.Errorf("plan has no attribute %s", k.Name)
			}
			v, err := plan.Attr(k.Name)
			if err != nil || v == nil || !plans.Same(v, k.Def) {
				t.Errorf("plan.%s = %v (err %v), want the default %s", k.Name, v, err, k.Def)
			}
			// replace(name=default) and sweep(name=[default]) take the keyword.
			env := starlark.StringDict{"p": plan, "v": k.Def}
			for k2, v2 := range pre {
				env[k2] = v2
			}
			for _, expr := range []string{"p.replace(" + k.Name + " = v)", "sweep(p, " + k.Name + " = [v])"} {
				if _, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", expr, env); err != nil {
					t.Errorf("%s: %v", expr, err)
				}
			}
		})
	}
}
