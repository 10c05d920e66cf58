package lang

import (
	"strings"
	"testing"
)

// TestHFConfigHubIDHint checks that hf_config given a Hub id, which is no
// file, says how to fetch its config.json; a missing file's path gets no
// such hint.
func TestHFConfigHubIDHint(t *testing.T) {
	for _, tc := range []struct{ path, hint string }{
		{"Qwen/Qwen3-8B", `hint: "Qwen/Qwen3-8B" looks like a Hugging Face Hub id; hf_config reads a config.json and memsh downloads nothing: hf download Qwen/Qwen3-8B config.json --local-dir Qwen3-8B fetches it, then hf_config("Qwen3-8B/config.json")`},
		{"meta-llama/Llama-3.2-1B", "looks like a Hugging Face Hub id"},
		{"configs/missing.json", ""},
		{"missing.json", ""},
	} {
		_, stderr := run(t, tree("main.star", `m = hf_config("`+tc.path+`")`+"\n"), "main.star", Options{})
		if !strings.Contains(stderr, "no such file "+tc.path) || strings.Contains(stderr, "hint:") != (tc.hint != "") || !strings.Contains(stderr, tc.hint) {
			t.Errorf("hf_config(%q): %s\nwant no such file and a hint containing %q", tc.path, stderr, tc.hint)
		}
	}
}
