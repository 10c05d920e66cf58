package repl

import (
	"strings"
	"testing"
)

// TestPythonHabits checks that what Python's REPL takes (help, help(x),
// exit(), quit) does at the prompt what the :command does, and that a
// name the session binds keeps its own meaning.
func TestPythonHabits(t *testing.T) {
	command := func(lines ...string) (string, string) {
		out, errs, _ := session(t, lines, nil, Options{})
		return out, errs
	}
	for _, tc := range []struct {
		typed, as []string
	}{
		{[]string{"help(fmt_bytes)"}, []string{":help fmt_bytes"}},
		{[]string{`help("to_gib")`}, []string{":help to_gib"}},
		{[]string{"help( train )"}, []string{":help train"}},
		{[]string{"help"}, []string{":help"}},
		{[]string{"help()"}, []string{":help"}},
		{[]string{"help(no_such_name)"}, []string{":help no_such_name"}},
		{[]string{"exit()", "1"}, []string{":quit", "1"}},
		{[]string{"quit", "1"}, []string{":quit", "1"}},
		{[]string{"exit", "1"}, []string{":quit", "1"}},
		{[]string{"help = 3", "help", "exit = 4", "exit"}, []string{"3", "4"}},
	} {
		gotOut, gotErr := command(tc.typed...)
		wantOut, wantErr := command(tc.as...)
		if gotOut != wantOut || gotErr != wantErr {
			t.Errorf("%q: got %q (stderr %q), want what %q prints: %q (stderr %q)", tc.typed, gotOut, gotErr, tc.as, wantOut, wantErr)
		}
	}
	// A trainer's or PyTorch's name says what memsh calls it.
	if _, errs := command(":help gradient_accumulation_steps", "help(total_memory)"); !strings.Contains(errs, "grad_accum=N") || !strings.Contains(errs, "r.capacity") {
		t.Errorf(":help of a trainer's and PyTorch's names: %q", errs)
	}
	// Not a habit: a call with arguments help(NAME) does not take.
	if _, errs := command("help(1 + 2)"); errs == "" {
		t.Error("help(1 + 2) ran: want Starlark's undefined: help")
	}
}
