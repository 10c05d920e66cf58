package hf

import (
	"strings"
	"testing"
)

// TestNestedKeyPaths: a key read from a nested object is named by its
// path in config.json (review25: errors inside text_config named the bare
// key, which the file's top level may also hold).
func TestNestedKeyPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(c *hfConfig) *hfConfig // the config whose error to read
		want string
	}{
		{"bad nested value", func(c *hfConfig) *hfConfig { tc := c.sub("text_config"); tc.size("hidden_size"); return tc }, `"text_config.hidden_size" `},
		{"missing nested key", func(c *hfConfig) *hfConfig { tc := c.sub("text_config"); tc.size("vocab_size"); return tc }, `config.json has no "text_config.vocab_size"`},
		{"twice nested", func(c *hfConfig) *hfConfig {
			rs := c.sub("text_config").sub("rope_scaling")
			rs.size("factor")
			return rs
		}, `config.json has no "text_config.rope_scaling.factor"`},
		{"missing object", func(c *hfConfig) *hfConfig { c.sub("vision_config"); return c }, `config.json has no "vision_config" object`},
		{"top level", func(c *hfConfig) *hfConfig { c.size("hidden_size"); return c }, `"hidden_size" `},
	} {
		c, err := parseHFConfig([]byte(`{"model_type": "x", "hidden_size": -1, "text_config": {"hidden_size": -1, "rope_scaling": {}}}`))
		if err != nil {
			t.Fatal(err)
		}
		got := tc.read(c).err // a nested reader's error is its own until the builder hands it on
		if got == nil || !strings.Contains(got.Msg, tc.want) {
			t.Errorf("%s: %v, want it to contain %q", tc.name, got, tc.want)
		}
	}
}
