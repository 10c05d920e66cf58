package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --timeout stops a script that the step limit would let run on, with a
// message naming the flag, and exit code 1 (not 130: nobody interrupted).
func TestTimeoutFlag(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop.star")
	if err := os.WriteFile(loop, []byte("n = 0\nfor i in range(1000000000):\n    n += i\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.star")
	if err := os.WriteFile(ok, []byte("print(1 + 1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		output string // in stdout or stderr (memsh test reports failures on stdout)
	}{
		{"stops the loop", []string{"--max-steps=100000000000", "run", "--timeout=200ms", loop}, 1,
			"error: execution exceeded the time limit of 200ms (use --timeout to raise)"},
		{"test command too", []string{"--max-steps=100000000000", "--timeout=200ms", "test", loop}, 1,
			"execution exceeded the time limit of 200ms"},
		{"a quick script is unaffected", []string{"run", "--timeout=10s", ok}, 0, ""},
		{"negative", []string{"--timeout=-1s", "run", ok}, 2, "invalid --timeout value -1s"},
		{"not a duration", []string{"--timeout=5", "run", ok}, 2, "invalid value \"5\" for flag -timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb, func(string) string { return "" })
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if got := out.String() + errb.String(); !strings.Contains(got, tc.output) {
				t.Errorf("output %q lacks %q", got, tc.output)
			}
		})
	}
}
