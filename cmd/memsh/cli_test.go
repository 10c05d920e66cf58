package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
)

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.star", "print(argv)\n")
	bad := write("bad.star", "x = 1 // 0\n")
	loop := write("loop.star", "for i in range(1000000000):\n    pass\n")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"help", nil, 0, "Usage:", ""},
		{"help command", []string{"help"}, 0, "Usage:", ""},
		{"-h", []string{"-h"}, 0, "Usage:", ""},
		{"version", []string{"version"}, 0, "memsh " + version, ""},
		{"--version", []string{"--version"}, 0, "memsh " + version, ""},
		{"-V", []string{"-V"}, 0, "memsh " + version, ""},
		{"doc of a trainer's name", []string{"doc", "per_device_train_batch_size"}, 2, "", "memsh calls the sequences per GPU per forward batch: batch=N"},
		{"doc of PyTorch's name", []string{"doc", "max_memory_allocated"}, 2, "", "r.peak_allocated is the step's max_memory_allocated"},
		{"run ok with args", []string{"run", ok, "a", "--b"}, 0, `["a", "--b"]`, ""},
		{"flags after the command", []string{"run", "--max-steps", "50", ok}, 0, "[]", ""},
		{"script error", []string{"run", bad}, 1, "", "error: floored division by zero"},
		{"missing script", []string{"run", filepath.Join(dir, "nope.star")}, 1, "", "no such file"},
		{"step limit", []string{"--max-steps=1000", "run", loop}, 1, "", "execution exceeded 1000 steps (use --max-steps to raise)"},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"run without file", []string{"run"}, 2, "", "run needs a script"},
		{"bad flag", []string{"--nope", "run", ok}, 2, "", "unknown flag --nope"},
		{"a misspelt flag", []string{"--colour", "never", "run", ok}, 2, "", "unknown flag --colour (did you mean --color?)"},
		{"a fit flag near another", []string{"fit", ok, "--sequence", "8"}, 2, "", "unknown flag --sequence (did you mean --seq?)"},
		{"bad color", []string{"--color=sometimes", "run", ok}, 2, "", `invalid --color value "sometimes"`},
		{"bad max-steps", []string{"--max-steps=x", "run", ok}, 2, "", "invalid value"},
		{"zero max-steps", []string{"--max-steps=0", "run", ok}, 2, "", "invalid --max-steps value 0"},
		{"doc unknown", []string{"doc", "gpux"}, 2, "", "did you mean gpu?"},
		{"doc two names", []string{"doc", "a", "b"}, 2, "", "doc takes one name"},
		{"version args", []string{"version", "x"}, 2, "", "version takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb, func(string) string { return "" })
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.stdout)
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.stderr)
			}
			if tc.code == 1 && strings.Count(errb.String(), "error:") != 1 {
				t.Errorf("error printed %d times: %q", strings.Count(errb.String(), "error:"), errb.String())
			}
		})
	}
}

func TestInterruptedExitCode(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop.star")
	os.WriteFile(loop, []byte("for i in range(1000000000):\n    pass\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"run", loop}, &out, &errb, func(string) string { return "" }); code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
	if !strings.Contains(errb.String(), "error: interrupted") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestUseColor(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	var buf bytes.Buffer
	for _, tc := range []struct {
		mode string
		env  map[string]string
		want bool
	}{
		{"always", map[string]string{"NO_COLOR": "1"}, true},
		{"never", nil, false},
		{"auto", map[string]string{"NO_COLOR": "1"}, false},
		{"auto", map[string]string{"TERM": "dumb"}, false},
		{"auto", nil, false}, // a buffer is no terminal
	} {
		if got := useColor(tc.mode, &buf, env(tc.env)); got != tc.want {
			t.Errorf("useColor(%s, %v) = %v, want %v", tc.mode, tc.env, got, tc.want)
		}
	}
}

func TestColorAlways(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.star")
	os.WriteFile(bad, []byte("x = true\n"), 0o644)
	var out, errb bytes.Buffer
	run(context.Background(), []string{"--color=always", "run", bad}, &out, &errb, func(string) string { return "1" })
	if !strings.Contains(errb.String(), host.Paint(true, host.StyleError, "error:")) {
		t.Fatalf("no colour in %q", errb.String())
	}
}
