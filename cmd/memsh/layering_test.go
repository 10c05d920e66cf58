package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering checks DESIGN.md's import rules: imports flow cmd -> lang,
// lang/repl -> builtins -> sim, and sim imports no Starlark.
func TestLayering(t *testing.T) {
	const mod = "github.com/memsh/memsh/"
	for _, tc := range []struct {
		dir       string
		forbidden []string // import path prefixes
	}{
		{"sim", []string{"go.starlark.net", mod}},
		{"builtins", []string{mod + "lang", mod + "cmd", "github.com/chzyer/readline", "github.com/fatih/color"}},
		{"lang", []string{mod + "cmd", "github.com/chzyer/readline", "github.com/fatih/color"}},
		{"stdlib", []string{"go.starlark.net", mod}},
		{"plot", []string{"go.starlark.net", mod + "builtins", mod + "lang", mod + "cmd", mod + "jsondoc"}},
		{"jsondoc", []string{"go.starlark.net", mod}},
	} {
		files, _ := filepath.Glob(filepath.Join("..", "..", tc.dir, "*.go"))
		if len(files) == 0 {
			t.Errorf("%s: no Go files", tc.dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			for _, imp := range parsed.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range tc.forbidden {
					if strings.HasPrefix(p, bad) && !(tc.dir == "sim" && p == mod+"sim") {
						t.Errorf("%s imports %s, which %s must not", f, p, tc.dir)
					}
				}
			}
		}
	}
}
