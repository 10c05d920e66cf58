package hf

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestDiffConfigs builds each config of sim/testdata/hf/diff (the config.json
// of sim/testdata/hf as PretrainedConfig.save_pretrained writes it: only what
// differs from the config class's defaults, tools/oracle/hf_diff_configs.py;
// the transformers version is in the README there) and the full file, and
// wants the same model: the same parameter count and the same modules. A
// difference is a reader default that is not the config class's.
func TestDiffConfigs(t *testing.T) {
	paths, err := filepath.Glob("../testdata/hf/diff/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no diff configs: %v", err)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			full, err := os.ReadFile("../testdata/hf/" + name)
			if err != nil {
				t.Fatal(err)
			}
			diff, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			// transformers 5.17.0 wrote the diff files (its README).
			opts := Options{Attn: "sdpa", MTP: true, Transformers: "5.17.0"}
			want, err := FromConfigOptions(full, opts)
			if err != nil {
				t.Skipf("full file: %v", err)
			}
			got, err := FromConfigOptions(diff, opts)
			if err != nil {
				t.Fatalf("saved file: %v", err)
			}
			if g, w := got.Params(), want.Params(); g != w {
				t.Errorf("params: saved file %d, full file %d", g, w)
			}
			if g, w := fmt.Sprint(got.Describe()), fmt.Sprint(want.Describe()); g != w {
				t.Errorf("modules differ:\nsaved %s\nfull  %s", g, w)
			}
		})
	}
}
