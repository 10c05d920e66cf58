package main

import (
	"os"
	"path/filepath"
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
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "scripts"),
		UpdateScripts:       os.Getenv("MEMSH_UPDATE") != "",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("NO_COLOR", "1")
			e.Setenv("MEMSH_HISTFILE", filepath.Join(e.WorkDir, ".history"))
			e.Setenv("EXAMPLES", examples)
			return nil
		},
	})
}
