package builtins

import (
	"strings"
	"testing"

	"go.starlark.net/syntax"
)

// TestDocumentedDefaultsAccepted calls every builtin with each keyword
// its signature documents, set to the documented default, and fails
// where the builtin refuses that value or keyword: what `memsh doc`
// shows must be what a script may write (lora(target_pattern=None),
// mlp(proj_names=None), attention(proj_names=None) and
// add_embedding(buffer=None) refused the None they document). Other
// errors (a required argument missing, a keyword that needs another)
// are the calls' own.
func TestDocumentedDefaultsAccepted(t *testing.T) {
	eval := starEval(t, "")
	calls := 0
	for _, b := range All() {
		if b.Fn == nil {
			continue
		}
		sig := strings.NewReplacer("|", " or ", "...", "_").Replace(b.Sig)
		e, err := (&syntax.FileOptions{}).ParseExpr("sig", sig, 0)
		if err != nil {
			t.Errorf("%s: Sig %q does not parse: %v", b.Name, b.Sig, err)
			continue
		}
		call, ok := e.(*syntax.CallExpr)
		if !ok {
			continue
		}
		for _, a := range call.Args {
			kw, ok := a.(*syntax.BinaryExpr)
			if !ok || kw.Op != syntax.EQ {
				continue
			}
			name := kw.X.(*syntax.Ident).Name
			start, end := kw.Y.Span()
			expr := b.Name + "(" + name + "=" + sig[start.Col-1:end.Col-1] + ")"
			calls++
			if _, err := eval(expr); err != nil {
				msg := err.Error()
				if strings.Contains(msg, "unexpected keyword") || strings.Contains(msg, `for parameter "`+name+`"`) ||
					strings.Contains(msg, "internal error") {
					t.Errorf("%s: %v", expr, err)
				}
			}
		}
	}
	if calls < 100 {
		t.Errorf("only %d documented keywords found: the signatures' parse is off", calls)
	}
	t.Logf("%d documented defaults written out", calls)
}
