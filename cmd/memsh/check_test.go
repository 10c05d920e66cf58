package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckExitCodes: memsh check is a gate for job scripts: 0 when the
// step fits with the headroom asked, 1 when it does not, 2 when the
// command line or the config is wrong (nothing was decided).
func TestCheckExitCodes(t *testing.T) {
	recipe := filepath.Join("..", "..", "importers", "testdata", "torchtune", "llama3_1_8B_full_single_device.yaml")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // substring
	}{
		{"fits", []string{"check", recipe, "--seq", "2048", "--top", "0"}, 0, ""},
		{"fits with the headroom", []string{"check", recipe, "--seq", "2048", "--top", "0", "--headroom", "50%"}, 0, ""},
		{"not with the headroom", []string{"check", recipe, "--seq", "2048", "--top", "0", "--headroom", "0.6"}, 1, ""},
		{"does not fit", []string{"check", recipe, "--seq", "8192", "--gpu", "RTX-4090", "--top", "0"}, 1, ""},
		{"no sequence length", []string{"check", recipe}, 2, "key tokenizer.max_seq_len"},
		{"a contradictory config", []string{"check", recipe, "--seq", "64", "gradient_accumulation_steps=2"}, 2, "key optimizer_in_bwd"},
		{"a plan train() rejects", []string{"check", recipe, "--seq", "64", "--gpu", "H900"}, 2, "H900"},
		{"no config", []string{"check"}, 2, "check needs a trainer config"},
		{"an unknown trainer", []string{"check", recipe, "--trainer", "keras"}, 2, "unknown trainer keras"},
		{"a usage error", []string{"check", recipe, "--nodes", "0"}, 2, "--nodes must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr, func(string) string { return "" })
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tc.stderr)
			}
			if strings.Contains(stderr.String(), "already printed") {
				t.Errorf("stderr leaks an internal sentinel: %q", stderr.String())
			}
		})
	}
}
