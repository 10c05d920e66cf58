package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers ranks every package of the module (docs/architecture.md draws the
// same picture): a package may import only packages of a lower rank, so
// imports flow one way and cannot form a cycle. A new package must be
// placed here.
var layers = map[string]int{
	"sim/units":           0,
	"sim/alloc":           1,
	"sim/hw":              1,
	"sim/core":            2,
	"sim/nn":              3,
	"sim/replay":          4,
	"sim/graph":           5,
	"sim/timing":          6,
	"sim/hf":              7,
	"sim/litgpt":          7,
	"sim":                 10,
	"internal/testmodels": 9,
	"internal/hftest":     0,
	"sim/search":          12,
	"sim/advise":          12,
	"stdlib":              0,
	"jsondoc":             0,
	"snapshot":            15,
	"perfetto":            15,
	"plot":                20,
	"live":                21,
	"builtins/host":       25,
	"builtins/models":     26,
	"builtins/plans":      27,
	"builtins/reports":    28,
	"builtins/tables":     29,
	"builtins":            30,
	"importers":           35,
	"lang":                40,
	"lang/langtest":       41,
	"tools/oracle":        45,
	"lang/repl":           50,
	"cmd/memsh":           60,
}

// foreign lists what a package must not import from outside the module.
var foreign = map[string][]string{
	"sim":       {"go.starlark.net", "github.com/chzyer/readline", "github.com/fatih/color"},
	"stdlib":    {"go.starlark.net"},
	"jsondoc":   {"go.starlark.net"},
	"plot":      {"go.starlark.net"},
	"snapshot":  {"go.starlark.net"},
	"perfetto":  {"go.starlark.net"},
	"live":      {"go.starlark.net"},
	"importers": {"go.starlark.net"}, // but its parser: allowed below
	"builtins":  {"github.com/chzyer/readline"},
	"lang":      {"github.com/chzyer/readline"},
}

// allowed lists what a package may import of what foreign forbids it:
// importers reads Python configs with Starlark's parser (reading a file
// is not running one) and evaluates their config tree itself; the
// interpreter (go.starlark.net/starlark, starlarkstruct, resolve) stays
// out, so an importer's result is still a script.
var allowed = map[string][]string{
	"importers": {"go.starlark.net/syntax"},
}

// TestLayering checks the import rules of docs/architecture.md: imports flow
// down the ranks above (cmd -> lang/repl -> lang -> builtins -> plot -> sim),
// sim and its packages import no Starlark, and every package is ranked.
func TestLayering(t *testing.T) {
	const mod = "github.com/memsh/memsh/"
	root := filepath.Join("..", "..")
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dirs[filepath.ToSlash(rel)] = append(dirs[filepath.ToSlash(rel)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, files := range dirs {
		rank, ok := layers[dir]
		if !ok {
			t.Errorf("package %s has no rank in layering_test.go (and docs/architecture.md)", dir)
			continue
		}
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			for _, imp := range parsed.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, mod) {
					dep := strings.TrimPrefix(p, mod)
					if r, ok := layers[dep]; ok && r >= rank {
						t.Errorf("%s imports %s: %s (rank %d) may import only lower ranks, not %d", f, dep, dir, rank, r)
					}
					continue
				}
				for _, bad := range foreignOf(dir) {
					if strings.HasPrefix(p, bad) && !slices.Contains(allowed[dir], p) {
						t.Errorf("%s imports %s, which %s must not", f, p, dir)
					}
				}
			}
		}
	}
}

// foreignOf is the foreign list of dir, sim's for every package under sim/.
func foreignOf(dir string) []string {
	for _, top := range []string{"sim", "builtins"} {
		if strings.HasPrefix(dir, top+"/") {
			return foreign[top]
		}
	}
	return foreign[dir]
}

// TestArchitectureTable checks that docs/architecture.md's table of
// packages ranks every package as layers does: each row's rank (a number,
// or a range "25-29" for a row of several) holds the rank of every package
// it names, and every ranked package has a row.
func TestArchitectureTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		lo, hi, ok := rankRange(strings.TrimSpace(cells[1]))
		if !ok {
			continue
		}
		names := strings.Split(cells[2], "`")
		for i := 1; i < len(names); i += 2 {
			pkg := names[i]
			r, ranked := layers[pkg]
			switch {
			case !ranked:
				t.Errorf("docs/architecture.md ranks %s, which layering_test.go does not", pkg)
			case r < lo || r > hi:
				t.Errorf("docs/architecture.md ranks %s %s, layering_test.go %d", pkg, strings.TrimSpace(cells[1]), r)
			}
			seen[pkg] = true
		}
	}
	for pkg := range layers {
		if !seen[pkg] {
			t.Errorf("%s has no row in docs/architecture.md's table of packages", pkg)
		}
	}
}

// rankRange reads a rank cell: "12" or "25-29".
func rankRange(cell string) (lo, hi int, ok bool) {
	a, b, isRange := strings.Cut(cell, "-")
	lo, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	hi, err = strconv.Atoi(b)
	return lo, hi, err == nil && hi >= lo
}
