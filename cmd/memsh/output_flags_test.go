package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		operands []string
		out      string
		html     bool
		err      string
	}{
		{args: []string{"f.star"}, operands: []string{"f.star"}},
		{args: []string{"f.star", "-o", "x.svg"}, operands: []string{"f.star"}, out: "x.svg"},
		{args: []string{"-o", "x.svg", "f.star", "a", "--html", "b"}, operands: []string{"f.star", "a", "b"}, out: "x.svg", html: true},
		{args: []string{"f.star", "--", "-o", "x"}, operands: []string{"f.star", "-o", "x"}},
		{args: []string{"f.star", "-o", "x", "--", "--html"}, operands: []string{"f.star", "--html"}, out: "x"},
		{args: []string{"f.star", "-"}, operands: []string{"f.star", "-"}},
		{args: []string{"f.star", "-o"}, err: "flag needs an argument: -o"},
		{args: []string{"f.star", "--json"}, err: "unknown flag --json (memsh help lists the flags)"},
		{args: []string{"f.star", "-jsn"}, err: "unknown flag -jsn (memsh help lists the flags)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("plot", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			out := fs.String("o", "", "")
			html := fs.Bool("html", false, "")
			got, err := parseInterspersed(fs, tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.operands, got); d != "" {
				t.Errorf("operands (-want +got):\n%s", d)
			}
			if *out != tc.out || *html != tc.html {
				t.Errorf("-o %q --html %v, want -o %q --html %v", *out, *html, tc.out, tc.html)
			}
		})
	}
}

func TestOutputFlagsCheck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cmd  string
		err  string
	}{
		{[]string{"--json", "--plot", "p.svg"}, "run", ""},
		{[]string{"--update"}, "test", ""},
		{[]string{"-o", "x", "--html"}, "plot", ""},
		{[]string{"--markdown"}, "doc", ""},
		{[]string{"--json=false"}, "run", ""},
		{[]string{"--json"}, "doc", "--json is a flag of memsh run, fit, compare and check, not of doc"},
		{[]string{"--update", "-o", "x"}, "run", "-o is a flag of memsh plot, not of run"},
		{[]string{"--markdown"}, "repl", "--markdown is a flag of memsh doc, not of repl"},
		{[]string{"--gpu", "H200", "--seq", "512", "--batch", "2", "--gpus", "8", "--precision", "bf16", "--top", "3", "--json"}, "fit", ""},
		{[]string{"--seq", "512"}, "run", "--seq is a flag of memsh fit and check, not of run"},
	} {
		var o outputFlags
		fs := flag.NewFlagSet("memsh", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err := o.check(tc.cmd)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
			t.Errorf("%v for %s: err = %v, want %q", tc.args, tc.cmd, err, tc.err)
		}
	}
}
