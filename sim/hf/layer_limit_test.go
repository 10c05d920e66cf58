package hf

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestLayerCountRefusedWhenRead: a layer count past core.MaxLayers is
// refused as its key is read, with the key's path and the bound, and the
// family builds no layer for it (the getter gives 0 once c.err is set, so
// each case runs in milliseconds). Before the bound Gemma 3 1B with
// num_hidden_layers 16,777,215 filled its sliding-window map for 7 s
// (buildDecoder, slidingLayers; go test -cpuprofile) and Llama's lowering
// was stopped only by the op bound, whose error names no key. A count at
// the bound still builds.
func TestLayerCountRefusedWhenRead(t *testing.T) {
	for _, tc := range []struct {
		config string
		path   []string // the key, nested objects first
		opts   Options
	}{
		{"gemma-3-1b-it.json", []string{"num_hidden_layers"}, Options{Attn: "sdpa"}},
		{"llama-2-7b.json", []string{"num_hidden_layers"}, Options{Attn: "sdpa"}},
		{"gpt2.json", []string{"n_layer"}, Options{Attn: "sdpa"}},
		{"qwen2.5-vl-tiny.json", []string{"vision_config", "depth"}, Options{Attn: "sdpa", Transformers: "5.25.0"}},
		{"deepseek-v3.json", []string{"num_nextn_predict_layers"}, Options{Attn: "sdpa", MTP: true}},
		{"gemma3n-tiny.json", []string{"num_hidden_layers"}, Options{Attn: "sdpa"}},
	} {
		for _, n := range []int64{16_777_215, core.MaxLayers + 1} {
			_, err := FromConfigOptions(configWith(t, tc.config, tc.path, n), tc.opts)
			key := strings.Join(tc.path, ".")
			want := `"` + key + `" is more layers than memsh simulates`
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "at most 200000") {
				t.Errorf("%s with %s = %d: %v; want %q and the bound", tc.config, key, n, err, want)
			}
		}
	}
	if _, err := FromConfigOptions(configWith(t, "gpt2.json", []string{"n_layer"}, core.MaxLayers), Options{Attn: "sdpa"}); err != nil && strings.Contains(err.Error(), "more layers") {
		t.Errorf("n_layer at the bound refused: %v", err)
	}
}

// configWith is sim/testdata/hf/config with the integer at path set to n.
func configWith(t *testing.T, config string, path []string, n int64) []byte {
	t.Helper()
	data, err := os.ReadFile("../testdata/hf/" + config)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	obj := raw
	for _, k := range path[:len(path)-1] {
		obj = obj[k].(map[string]any)
	}
	obj[path[len(path)-1]] = n
	out, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
