package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cmdTest is memsh test [--update] [DIR|FILE.star ...]: run each script
// and compare its output (print() and emitted values, as memsh run
// writes them without colour) with the golden file beside it, x.golden
// for x.star. A directory stands for the scripts under it that have a
// golden file; named files are tests whether or not they have one yet.
// --update writes the goldens instead of comparing, and takes a folder's
// scripts without one too, except the libraries the others load. A failing script
// (an error or a failed expect()) fails its test either way.
func (e *env) cmdTest(operands []string) error {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&e.out.update, "update", e.out.update, "")
	operands, err := parseInterspersed(fs, operands)
	if err != nil {
		return err
	}
	if len(operands) == 0 {
		operands = []string{"."}
	}
	files, err := testFiles(operands, e.out.update)
	if err != nil {
		return err
	}
	failed := 0
	for _, file := range files {
		if !e.runTest(file) {
			failed++
		}
		if e.ctx.Err() != nil {
			return errPrinted // interrupted: exit 130
		}
	}
	switch {
	case failed > 0:
		fmt.Fprintf(e.stdout, "FAIL: %d of %s failed\n", failed, plural(len(files), "script"))
		return errPrinted
	case e.out.update:
		fmt.Fprintf(e.stdout, "ok: %s run, goldens up to date\n", plural(len(files), "script"))
	default:
		fmt.Fprintf(e.stdout, "ok: %s passed\n", plural(len(files), "script"))
	}
	return nil
}

// runTest runs one script and reports on stdout; it returns whether the
// test passed.
func (e *env) runTest(file string) bool {
	golden := strings.TrimSuffix(file, ".star") + ".golden"
	var out, errOut bytes.Buffer
	if _, err := e.execScript(e.ctx, scriptRun{file: file, out: &out, errOut: &errOut}); err != nil {
		fmt.Fprintf(e.stdout, "FAIL %s\n%s", file, indent(errOut.String()))
		return false
	}
	got := out.String()
	g, err := openGolden(golden) // golden.go: confined, regular files only
	if err != nil {
		fmt.Fprintf(e.stdout, "FAIL %s\n    %v\n", file, err)
		return false
	}
	defer g.Close()
	want, exists, err := g.read()
	switch {
	case err != nil:
		fmt.Fprintf(e.stdout, "FAIL %s\n    %v\n", file, err)
		return false
	case e.out.update:
		if exists && string(want) == got {
			fmt.Fprintf(e.stdout, "ok   %s\n", file)
			return true
		}
		if werr := g.write([]byte(got)); werr != nil {
			fmt.Fprintf(e.stdout, "FAIL %s\n    %v\n", file, werr)
			return false
		}
		verb := "updated"
		if !exists {
			verb = "created"
		}
		fmt.Fprintf(e.stdout, "ok   %s (%s %s)\n", file, verb, golden)
		return true
	case !exists:
		fmt.Fprintf(e.stdout, "FAIL %s\n    no golden file %s: create it with memsh test --update %s\n", file, golden, file)
		return false
	case string(want) != got:
		diff := goldenDiff(golden, string(want), got) // test_files.go: a unified diff of whole lines
		fmt.Fprintf(e.stdout, "FAIL %s\n    output differs from %s (-golden +output):\n%s    (memsh test --update %s accepts the new output)\n",
			file, golden, indent(diff), file)
		return false
	}
	fmt.Fprintf(e.stdout, "ok   %s\n", file)
	return true
}

// testFiles expands the operands: a .star file is a test; a directory
// holds the .star files under it (hidden folders skipped) that have a
// golden file beside them, and with update (creating goldens) also those
// that have none yet, except the libraries the others load.
func testFiles(operands []string, update bool) ([]string, error) {
	var files []string
	for _, op := range operands {
		fi, err := os.Stat(op)
		if err != nil {
			return nil, usagef("cannot test %s: %v", op, unwrapPath(err))
		}
		if !fi.IsDir() {
			if !strings.HasSuffix(op, ".star") {
				return nil, usagef("cannot test %s: not a .star script or a directory", op)
			}
			files = append(files, op)
			continue
		}
		var found []string
		err = filepath.WalkDir(op, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != op && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".star") {
				if _, err := os.Lstat(strings.TrimSuffix(p, ".star") + ".golden"); err == nil || update {
					found = append(found, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot list %s: %v", op, unwrapPath(err))
		}
		if update {
			libs := libraries(found)
			kept := found[:0]
			for _, p := range found {
				if _, err := os.Lstat(strings.TrimSuffix(p, ".star") + ".golden"); err == nil || !libs[filepath.Clean(p)] {
					kept = append(kept, p)
				}
			}
			found = kept
		}
		if len(found) == 0 {
			if update {
				return nil, usagef("no tests in %s: it holds no .star script that another does not load", op)
			}
			return nil, usagef("no tests in %s: no x.star has an x.golden beside it (memsh test --update %s creates them)", op, op)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// indent prefixes each line of s with four spaces.
func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// unwrapPath drops the operation and path of an *fs.PathError.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return errors.New("no such file or directory")
		}
		return pe.Err
	}
	return err
}
