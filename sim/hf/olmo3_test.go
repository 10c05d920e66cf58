package hf

import (
	"slices"
	"testing"
)

// TestOlmo3Sliding: OLMo 3's sliding layers are layer_types' when the
// config has it, else Olmo3Config's pattern (every layer but each
// fourth); a null sliding_window, which leaves the sliding layers no
// window, is refused naming the key.
func TestOlmo3Sliding(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		want       []bool
		err        string
	}{
		{"default", ``, []bool{true, true, true, false, true, true, true, false}, ""},
		{"layer_types", `, "layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention", "full_attention", "full_attention", "full_attention", "sliding_attention"]`,
			[]bool{false, true, false, false, false, false, false, true}, ""},
		{"null window", `, "sliding_window": null`, []bool{true, true, true, false, true, true, true, false}, `"sliding_window" must be a window size for the sliding_attention layers (got null)`},
		{"rope_parameters not an object", `, "rope_parameters": 1`, []bool{true, true, true, false, true, true, true, false}, `"rope_parameters" must be an object or null`},
	} {
		c, err := parseHFConfig([]byte(`{"model_type": "olmo3"` + tc.keys + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.olmo3Sliding(8); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		checkKeyError(t, tc.name, c, tc.err)
	}
}
