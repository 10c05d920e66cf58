package builtins

import (
	"errors"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

func TestDidYouMean(t *testing.T) {
	known := []string{"fp32", "bf16-mixed", "fp16-mixed", "bf16", "adamw8bit"}
	for _, tc := range []struct{ name, want string }{
		{"bf16_mixed", `did you mean "bf16-mixed"?`},
		{"BF16-MIXED", `did you mean "bf16-mixed"?`},
		{"adam8bit", `did you mean "adamw8bit"?`},
		{"fp33", `did you mean "fp32"?`},
		{"int4", ""},
		{"", ""},
	} {
		if got := host.DidYouMean(tc.name, known); got != tc.want {
			t.Errorf("didYouMean(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTrainHints checks the hints that train() errors carry for the CLI.
func TestTrainHints(t *testing.T) {
	pre := Predeclared()
	for _, tc := range []struct{ expr, hint string }{
		{`train(m, seq = 8, precision = "bf16_mixed")`, `did you mean "bf16-mixed"?`},
		{`train(m, seq = 8, optimizer = "adam8bit")`, `did you mean "adamw8bit"?`},
		{`train(m, seq = 8, checkpoint = "ful")`, `did you mean "full"?`},
		{`train(m)`, "pass the tokens per sequence, e.g. train(model, batch=1, seq=2048)"},
		{`attention(4096, 24)`, "pass head_dim= when it is not dim/heads"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			thread := &starlark.Thread{}
			(&host.State{}).Attach(thread)
			src := "m = model(\"t\", embedding(10, 8), linear(8, 8))\nx = " + tc.expr + "\n"
			_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "t.star", src, pre)
			var se *units.Error
			if !errors.As(err, &se) || se.Hint != tc.hint {
				t.Fatalf("got %v (%#v), want hint %q", err, se, tc.hint)
			}
		})
	}
}
