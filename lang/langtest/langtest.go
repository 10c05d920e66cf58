package langtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/lang"
	"github.com/rogpeppe/go-internal/txtar"
)

// Run runs every dir/*.txtar as a subtest.
func Run(t *testing.T, dir string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no goldens in %s", dir)
	}
	update := os.Getenv("MEMSH_UPDATE") != ""
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			runOne(t, p, update)
		})
	}
}

func runOne(t *testing.T, path string, update bool) {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := fstest.MapFS{}
	var args []string
	want := map[string]string{}
	for _, f := range ar.Files {
		switch f.Name {
		case "stdout", "stderr":
			want[f.Name] = string(f.Data)
		case "args":
			args = strings.Fields(string(f.Data))
		default:
			files[f.Name] = &fstest.MapFile{Data: f.Data}
		}
	}
	if files["main.star"] == nil {
		t.Fatal("no main.star section")
	}
	var stdout, stderr bytes.Buffer
	in := lang.New(lang.Options{Stdout: &stdout, Files: files, Args: args})
	defer in.Close()
	if _, err := in.RunFile(context.Background(), "main.star"); err != nil {
		in.FormatError(&stderr, err, false)
	}
	got := map[string]string{"stdout": stdout.String(), "stderr": stderr.String()}
	if update {
		changed := false
		for _, name := range []string{"stdout", "stderr"} {
			if got[name] == want[name] {
				continue
			}
			changed = true
			setSection(ar, name, got[name])
		}
		if changed {
			if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, name := range []string{"stdout", "stderr"} {
		if diff := cmp.Diff(want[name], got[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// setSection replaces, adds or (for empty text) removes a section.
func setSection(ar *txtar.Archive, name, text string) {
	for i, f := range ar.Files {
		if f.Name == name {
			if text == "" {
				ar.Files = append(ar.Files[:i], ar.Files[i+1:]...)
			} else {
				ar.Files[i].Data = []byte(text)
			}
			return
		}
	}
	if text != "" {
		ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(text)})
	}
}
