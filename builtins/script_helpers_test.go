package builtins

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// runPreludeCases executes prelude (a script defining globals) once, then
// evaluates each case's expression against its globals, like runEvalCases.
func runPreludeCases(t *testing.T, prelude string, cases []evalCase) {
	t.Helper()
	pre := Predeclared()
	thread := &starlark.Thread{Name: "prelude"}
	(&host.State{}).Attach(thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "prelude.star", prelude, pre)
	if err != nil {
		t.Fatalf("prelude: %v", err)
	}
	env := starlark.StringDict{}
	for k, v := range pre {
		env[k] = v
	}
	for k, v := range globals {
		env[k] = v
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			thread := &starlark.Thread{Name: "test"}
			(&host.State{}).Attach(thread)
			v, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", tc.expr, env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error containing %q", v, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got := v.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
