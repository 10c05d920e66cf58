package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"memsh": func() { os.Exit(Main()) }})
}

// TestScripts runs the CLI goldens in testdata/scripts. Update them with
// MEMSH_UPDATE=1 go test ./... and review the diff.
func TestScripts(t *testing.T) {
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	configs, err := filepath.Abs(filepath.Join("..", "..", "importers", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "scripts"),
		UpdateScripts:       os.Getenv("MEMSH_UPDATE") != "",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mkfifo":   cmdMkfifo,
			"truncate": cmdTruncate,
		},
		Setup: func(e *testscript.Env) error {
			e.Setenv("NO_COLOR", "1")
			e.Setenv("MEMSH_HISTFILE", filepath.Join(e.WorkDir, ".history"))
			e.Setenv("EXAMPLES", examples)
			e.Setenv("CONFIGS", configs) // trainers' configs (memsh check)
			return nil
		},
	})
}

// cmdMkfifo makes named pipes (FIFOs): mkfifo PATH...
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: mkfifo PATH...")
	}
	for _, a := range args {
		ts.Check(syscall.Mkfifo(ts.MkAbs(a), 0o644))
	}
}

// cmdTruncate makes a file of SIZE bytes, sparse (zeros, no disk used):
// truncate SIZE PATH, SIZE in bytes or with a K, M or G suffix (binary).
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: truncate SIZE PATH")
	}
	size, scale := args[0], int64(1)
	for suffix, s := range map[string]int64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30} {
		if strings.HasSuffix(size, suffix) {
			size, scale = strings.TrimSuffix(size, suffix), s
		}
	}
	n, err := strconv.ParseInt(size, 10, 64)
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[1]))
	ts.Check(err)
	ts.Check(f.Truncate(n * scale))
	ts.Check(f.Close())
}
