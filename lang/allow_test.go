package lang

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Options.AllowRead (memsh --allow-read) opens more folders to loads and
// file reads, by a path from the reading file or an absolute path, each
// confined as the script's own tree: a symlink out of it is refused, and
// without the option nothing outside the script's tree is read.
func TestAllowRead(t *testing.T) {
	base := t.TempDir()
	config, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", "gpt2.json"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"plans/util.star":     "k = 2\n",
		"configs/config.json": string(config),
		"configs/lib.star":    "load(\"../plans/util.star\", \"k\")\nx = 3 * k\n",
		"secret/key.json":     "{}\n",
	}
	for name, text := range files {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "secret", "key.json"), filepath.Join(base, "configs", "key.json")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	configs := filepath.Join(base, "configs")
	for _, tc := range []struct {
		name, src string
		allow     []string
		out, err  string
	}{
		{"a path from the script", `print(hf_config("../configs/config.json").params)`, []string{configs}, "124439808\n", ""},
		{"an absolute path", `print(hf_config("` + filepath.ToSlash(filepath.Join(configs, "config.json")) + `").params)`, []string{configs}, "124439808\n", ""},
		{"a module there, loading one of the script's tree", `load("../configs/lib.star", "x")` + "\nprint(x)", []string{configs}, "6\n", ""},
		{"not allowed", `m = hf_config("../configs/config.json")`, nil, "", "path leaves the script's folder tree"},
		{"an absolute path not allowed", `m = hf_config("` + filepath.ToSlash(filepath.Join(configs, "config.json")) + `")`, nil, "", "absolute path"},
		{"a symlink out of the allowed folder", `m = hf_config("../configs/key.json")`, []string{configs}, "", "configs/key.json leaves the script's folder tree"},
		{"a folder beside the allowed one", `m = hf_config("../secret/key.json")`, []string{configs}, "", "path leaves the script's folder tree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			main := filepath.Join(base, "plans", "main.star")
			if err := os.WriteFile(main, []byte(tc.src+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			in := New(Options{Stdout: &out, AllowRead: tc.allow})
			defer in.Close()
			_, err := in.RunFile(context.Background(), main)
			in.FormatError(&errb, err, false)
			if tc.err == "" {
				if err != nil || out.String() != tc.out {
					t.Fatalf("got %q, error %s", out.String(), errb.String())
				}
				return
			}
			if err == nil || !strings.Contains(errb.String(), tc.err) {
				t.Fatalf("got error %q, want it to contain %q", errb.String(), tc.err)
			}
		})
	}
}
