package repl

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/lang"
)

func TestComplete(t *testing.T) {
	var out, errb bytes.Buffer
	in := lang.New(lang.Options{Stdout: &out})
	defer in.Close()
	s := New(in, &fakeReader{lines: []string{
		"def f(alpha, beta=2, *rest, gamma=3, **kw): pass",
		"word = 'abc'",
		"items = []",
		"_hidden = 1",
	}}, &out, &errb, Options{})
	if err := s.Run(context.Background()); err != nil || errb.Len() > 0 {
		t.Fatalf("setup: %v %s", err, errb.String())
	}
	for _, tc := range []struct {
		text  string
		cands []string
		word  string
	}{
		{"fmt_b", []string{"fmt_bytes"}, "fmt_b"},
		{"x = fmt_b", []string{"fmt_bytes"}, "fmt_b"},
		{"wo", []string{"word"}, "wo"},
		{"_h", []string{"_hidden"}, "_h"},
		{"de", []string{"deepstack_add", "deepstack_end", "def"}, "de"},
		{"", nil, ""},
		// Keyword names inside a call, from the builtin's Sig...
		{"fmt_bytes(", []string{"n=", "decimal="}, ""},
		{"r = fmt_bytes(GiB, ", []string{"n=", "decimal="}, ""},
		{"fmt_bytes(n=GiB, ", []string{"decimal="}, ""},
		{"fmt_bytes(n=GiB, dec", []string{"decimal="}, "dec"},
		// ... or from a Starlark function's parameters.
		{"f(", []string{"alpha=", "beta=", "gamma="}, ""},
		{"f(al", []string{"alpha=", "all"}, "al"},
		{"f(1, gam", []string{"gamma="}, "gam"},
		{"f(x[0], (1, 2), ", []string{"alpha=", "beta=", "gamma="}, ""},
		{"len(", nil, ""},
		{"if (", nil, ""},
		// Attributes after x., without calling anything.
		{"json.en", []string{"encode", "encode_indent"}, "en"},
		{"word.up", []string{"upper"}, "up"},
		{"items.app", []string{"append"}, "app"},
		{"f(word.st", []string{"startswith", "strip"}, "st"},
		{"nothing.x", nil, "x"},
		{"f().x", nil, ""},
		{"'s'.up", nil, ""},
		{"1.5", nil, ""},
		// Paths and names inside load.
		{`load("`, []string{"@stdlib//llm.star", "@stdlib//units.star"}, ""},
		{`load("@st`, []string{"@stdlib//llm.star", "@stdlib//units.star"}, "@st"},
		{`load("@stdlib//u`, []string{"@stdlib//units.star"}, "@stdlib//u"},
		{`load("@stdlib//units.star", "to_`, []string{"to_gb", "to_gib"}, "to_"},
		{`load('@stdlib//units.star', "x", 'per`, []string{"percent"}, "per"},
		{`print("fmt_`, nil, ""},
		{`x = "a" # fmt_b`, nil, ""},
		// Commands.
		{":he", []string{":help"}, ":he"},
		{":h", []string{":help", ":history"}, ":h"},
		{":help fmt_", []string{"fmt_bytes"}, "fmt_"},
		{":help :pa", []string{":paste"}, ":pa"},
		{":type word.low", []string{"lower"}, "low"},
	} {
		cands, word := s.Complete(tc.text)
		if d := cmp.Diff(tc.cands, cands); d != "" {
			t.Errorf("Complete(%q) (-want +got):\n%s", tc.text, d)
		}
		if len(tc.cands) > 0 && word != tc.word {
			t.Errorf("Complete(%q) word = %q, want %q", tc.text, word, tc.word)
		}
	}
}

func TestCompleteLineUsesTheStatementSoFar(t *testing.T) {
	var out bytes.Buffer
	in := lang.New(lang.Options{Stdout: &out})
	defer in.Close()
	s := New(in, &fakeReader{}, &out, &out, Options{})
	s.pending = []string{"x = fmt_bytes(", "    GiB,"}
	cands, _ := s.CompleteLine("    dec")
	if d := cmp.Diff([]string{"decimal="}, cands); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestTerminalDo(t *testing.T) {
	term := &Terminal{}
	term.SetCompleter(func(text string) ([]string, string) {
		return []string{"peak_allocated", "peak_reserved"}, "pe"
	})
	got, n := term.Do([]rune("r.pe"), 4)
	if n != 2 || len(got) != 2 || string(got[0]) != "ak_allocated" || string(got[1]) != "ak_reserved" {
		t.Errorf("Do = %q, %d; want suffixes after \"pe\" and 2", got, n)
	}
}

func TestSigParams(t *testing.T) {
	for _, tc := range []struct {
		sig  string
		want []string
	}{
		{"fmt_bytes(n, decimal=False)", []string{"n", "decimal"}},
		{`lora(rank=8, alpha=16, targets=["q", "v"], dropout=0.0)`, []string{"rank", "alpha", "targets", "dropout"}},
		{"sequential(*layers, name=None)", []string{"name"}},
		{"gpu(name, memory=None, ...)", []string{"name", "memory"}},
		{"GiB", nil},
	} {
		if d := cmp.Diff(tc.want, sigParams(tc.sig)); d != "" {
			t.Errorf("sigParams(%q) (-want +got):\n%s", tc.sig, d)
		}
	}
}

func TestNearest(t *testing.T) {
	names := []string{"help", "history", "vars", "type", "load", "paste", "reset", "quit"}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"hlep", []string{"help"}},
		{"hepl", []string{"help"}},
		{"histroy", []string{"history"}},
		{"vras", []string{"vars"}},
		{"zzzzzz", nil},
		{"lod", []string{"load"}},
	} {
		if d := cmp.Diff(tc.want, nearest(tc.in, names)); d != "" {
			t.Errorf("nearest(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

// A candidate list taller than the terminal scrolls the prompt away and
// what is typed next lands below it (issue 24 item 10): Tab lists the
// first screenful.
func TestTerminalFitsCandidates(t *testing.T) {
	var cands []string
	for i := range 40 {
		cands = append(cands, fmt.Sprintf("name_%02d=", i))
	}
	term := &Terminal{size: func() (int, int) { return 41, 10 }}
	term.SetCompleter(func(string) ([]string, string) { return cands, "name_" })
	got, n := term.Do([]rune("f(name_"), 7)
	// Columns of len("name_00=")+1 = 9 in 40: 4 of them; 8 rows leave the
	// prompt and one more line: 32 candidates.
	if n != 5 || len(got) != 32 || string(got[0]) != "00=" || string(got[31]) != "31=" {
		t.Errorf("Do kept %d candidates (%q ... ), word %d; want the first 32", len(got), got[:1], n)
	}
	term.size = func() (int, int) { return 41, 40 }
	if got, _ := term.Do([]rune("f(name_"), 7); len(got) != 40 {
		t.Errorf("a tall terminal kept %d of 40 candidates", len(got))
	}
	term.size = func() (int, int) { return 0, 0 } // unknown: all
	if got, _ := term.Do([]rune("f(name_"), 7); len(got) != 40 {
		t.Errorf("an unknown size kept %d of 40 candidates", len(got))
	}
}
