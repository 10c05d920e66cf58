package hf

import (
	"slices"
	"strings"
	"testing"
)

// checkKeyError checks c's error after a read: none when want is empty,
// else one whose message contains want.
func checkKeyError(t *testing.T, name string, c *hfConfig, want string) {
	t.Helper()
	switch {
	case want == "" && c.err != nil:
		t.Errorf("%s: %v", name, c.err)
	case want != "" && (c.err == nil || !strings.Contains(c.err.Msg, want)):
		t.Errorf("%s: error %v, want it to contain %s", name, c.err, want)
	}
}

// TestLayerTypes: layer_types, read once for Gemma 2/3's sliding layers,
// Llama 4's chunked layers and Gemma 4's full layers: the marked type's
// layers, or the key's error for a list of another length or an unknown
// type.
func TestLayerTypes(t *testing.T) {
	for _, tc := range []struct {
		name, list, marked, other string
		want                      []bool
		err                       string
	}{
		{"sliding", `["sliding_attention", "full_attention", "sliding_attention"]`, "sliding_attention", "full_attention", []bool{true, false, true}, ""},
		{"chunked", `["chunked_attention", "chunked_attention", "full_attention"]`, "chunked_attention", "full_attention", []bool{true, true, false}, ""},
		{"full", `["sliding_attention", "sliding_attention", "full_attention"]`, "full_attention", "sliding_attention", []bool{false, false, true}, ""},
		{"too short", `["full_attention"]`, "sliding_attention", "full_attention", []bool{false, false, false}, `"layer_types" must list one attention type per layer (3)`},
		{"not a list", `"full_attention"`, "sliding_attention", "full_attention", []bool{false, false, false}, `"layer_types" must list one attention type per layer (3)`},
		{"unknown type", `["sliding_attention", "linear_attention", "full_attention"]`, "sliding_attention", "full_attention", []bool{false, false, false},
			`"layer_types" names an attention type memsh does not know (got the string "linear_attention"; known: sliding_attention, full_attention)`},
	} {
		c, err := parseHFConfig([]byte(`{"model_type": "x", "layer_types": ` + tc.list + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got := c.layerTypes(3, tc.marked, tc.other)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		checkKeyError(t, tc.name, c, tc.err)
	}
}
