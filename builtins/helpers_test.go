package builtins

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// evalCase is one Starlark expression and its expected repr, or a
// substring of the expected error.
type evalCase struct {
	expr, want, err string
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	pre := Predeclared()
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			thread := &starlark.Thread{Name: "test"}
			(&host.State{}).Attach(thread)
			v, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", tc.expr, pre)
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
