package hf

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestFamiliesSince: a model type is refused under a transformers
// release older than the first wheel with its models/ folder (unzip -l
// of the 4.41.2 to 4.57.0 wheels), naming that release, and built from
// it on: a Qwen3 config under transformers="4.46.0" built Qwen3 as 4.46
// would, a model that release cannot load.
func TestFamiliesSince(t *testing.T) {
	for _, tc := range []struct {
		file, before, from, want string
	}{
		{"gemma2-tiny.json", "4.41.2", "4.42.0", `model_type "gemma2" needs transformers 4.42 or later`},
		{"mamba-codestral-7b.json", "4.43.4", "4.44.2", `model_type "mamba2" needs transformers 4.44 or later`},
		{"mllama-tiny.json", "4.44.2", "4.45.2", `model_type "mllama" needs transformers 4.45 or later`},
		{"phimoe-tiny.json", "4.45.2", "4.46.0", `model_type "phimoe" needs transformers 4.46 or later`},
		{"gemma-3-1b-it.json", "4.49.0", "4.50.0", `model_type "gemma3_text" needs transformers 4.50 or later`},
		{"deepseek-v3-tiny.json", "4.50.3", "4.51.0", `model_type "deepseek_v3" needs transformers 4.51 or later`},
		{"qwen3-8b.json", "4.50.3", "4.51.0", `model_type "qwen3" needs transformers 4.51 or later`},
		{"qwen3_moe-tiny.json", "4.50.3", "4.51.0", `model_type "qwen3_moe" needs transformers 4.51 or later`},
		{"deepseek-v2-tiny.json", "4.53.0", "4.54.0", `model_type "deepseek_v2" needs transformers 4.54 or later`},
		{"nemotron-h-8b-base-8k.json", "4.47.1", "4.48.0", `model_type "nemotron_h" needs transformers 4.48 or later`},
	} {
		data, err := os.ReadFile("../testdata/hf/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := FromConfigOptions(data, Options{Attn: "sdpa", Transformers: tc.before}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s under %s: error %v, want one containing %s", tc.file, tc.before, err, tc.want)
		}
		if _, err := FromConfigOptions(data, Options{Attn: "sdpa", Transformers: tc.from}); err != nil {
			t.Errorf("%s under %s: %v", tc.file, tc.from, err)
		}
	}
}

// TestTransformersNewerRefused: a release after the newest memsh has read
// (DefaultTransformers) is refused with a hint naming it, where
// transformers="6.0" built the model as 5.25 silently; a patch release of
// the newest is taken, as is anything older.
func TestTransformersNewerRefused(t *testing.T) {
	data, err := os.ReadFile("../testdata/hf/qwen3-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version, want string
	}{
		{"6.0", `transformers "6.0" is newer than the releases memsh models (up to 5.25)`},
		{"5.26.0", `transformers "5.26.0" is newer than the releases memsh models (up to 5.25)`},
		{"5.25.3", ""},
		{"5.25", ""},
		{"4.57.1", ""},
	} {
		_, err := FromConfigOptions(data, Options{Attn: "sdpa", Transformers: tc.version})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("transformers=%q: %v", tc.version, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("transformers=%q: error %v, want one containing %s", tc.version, err, tc.want)
		case tc.want != "":
			var ue *units.Error
			if !errors.As(err, &ue) || !strings.Contains(ue.Hint, `transformers="5.25.0"`) {
				t.Errorf("transformers=%q: %v has no hint naming the release to pass", tc.version, err)
			}
		}
	}
}
