package builtins

import (
	"strings"
	"testing"
)

// runPreludeCases executes prelude (a script defining globals) once, then
// evaluates each case's expression against its globals, like runEvalCases.
func runPreludeCases(t *testing.T, prelude string, cases []evalCase) {
	t.Helper()
	eval := starEval(t, prelude)
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			v, err := eval(tc.expr)
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
