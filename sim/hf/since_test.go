package hf

import (
	"os"
	"strings"
	"testing"
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
