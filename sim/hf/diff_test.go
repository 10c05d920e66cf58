package hf

import (
	"bytes"
	"encoding/json"
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

// dropKey returns the testdata/hf config name without its top-level key.
func dropKey(t *testing.T, name, key string) []byte {
	t.Helper()
	data, err := os.ReadFile("../testdata/hf/" + name)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[key]; !ok {
		t.Fatalf("%s has no %q", name, key)
	}
	delete(m, key)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFirstDenseDefault drops first_k_dense_replace from hub configs: where
// the file's value is the config class's default (transformers 5.17.0:
// DeepseekV3Config, DeepseekV32Config, GlmMoeDsaConfig 3; Glm4MoeConfig,
// Glm4MoeLiteConfig 1) the model is the full file's; where it is not
// (Moonlight's 1, GLM-4.7's 3) it differs.
func TestFirstDenseDefault(t *testing.T) {
	for _, tc := range []struct {
		file string
		same bool
	}{
		{"deepseek-v3.json", true},
		{"deepseek-v3.2.json", true},
		{"glm-5.json", true},
		{"glm-4.5-air.json", true},
		{"glm-4.7-flash.json", true},
		{"moonlight-16b-a3b-instruct.json", false},
		{"glm-4.7.json", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			full, err := os.ReadFile("../testdata/hf/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Attn: "sdpa", Transformers: "5.17.0"}
			want, err := FromConfigOptions(full, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromConfigOptions(dropKey(t, tc.file, "first_k_dense_replace"), opts)
			if err != nil {
				t.Fatal(err)
			}
			if same := got.Params() == want.Params(); same != tc.same {
				t.Errorf("without first_k_dense_replace: %d params, full file %d (want same=%v)", got.Params(), want.Params(), tc.same)
			}
		})
	}
}
