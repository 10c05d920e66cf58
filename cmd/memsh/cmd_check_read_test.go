package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadNamedConfigNotRegular: a file a config names (the HF Trainer's
// deepspeed config) that is a FIFO or a folder is refused before it is
// opened (opening a FIFO waits for a writer), and one outside the
// config's folder is refused too.
func TestReadNamedConfigNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "ds.json"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"ds.json", "ds.json is not a regular file (a named pipe (FIFO))"},
		{"sub", "sub is not a regular file (a folder)"},
		{"../x.json", "must be inside the config's folder"},
	} {
		_, err := readNamedConfig(dir, tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
