package hf

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// config.json as Python's json module writes it: Infinity, -Infinity and
// NaN outside strings; inside strings and identifiers they stay text.
func TestPythonJSON(t *testing.T) {
	c, err := parseHFConfig([]byte(`{"time_step_limit": [0.0, Infinity], "lo": -Infinity, "x": NaN,
		"name": "NaN Infinity", "NaNa": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	hi, _ := c.raw["time_step_limit"].([]any)[1].(json.Number).Float64()
	lo, _ := c.raw["lo"].(json.Number).Float64()
	if !math.IsInf(hi, 1) || !math.IsInf(lo, -1) {
		t.Errorf("Infinity read as %v and %v", hi, lo)
	}
	if c.raw["x"] != "NaN" || c.raw["name"] != "NaN Infinity" || c.raw["NaNa"] != json.Number("1") {
		t.Errorf("NaN and strings: %#v", c.raw)
	}
	// A syntax error after a rewrite is placed in the file as written.
	_, err = parseHFConfig([]byte("{\"a\": [Infinity, NaN],\n \"b\": ]}"))
	if err == nil || !strings.Contains(err.Error(), "line 2, column 7") {
		t.Errorf("error position: %v", err)
	}
	_, err = parseHFConfig([]byte(`{"a": Infinity, "b": }`))
	if err == nil || !strings.Contains(err.Error(), "line 1, column 22") {
		t.Errorf("error position: %v", err)
	}
}

// The supported model types include every family issue 19 asked for that
// is built so far (the unsupported-type error lists ModelTypes).
func TestModelTypes2026(t *testing.T) {
	have := map[string]bool{}
	for _, mt := range ModelTypes() {
		have[mt] = true
	}
	for _, mt := range []string{"deepseek_v3", "qwen3", "qwen3_moe", "gpt_oss", "gemma3_text", "phimoe"} {
		if !have[mt] {
			t.Errorf("model_type %q is not supported", mt)
		}
	}
}

// A value Python's json writes for a float JSON has no literal for is
// named as the file has it, not as memsh reads it (a NaN was "the string
// \"NaN\"", an Infinity "1e999").
func TestPythonJSONMessages(t *testing.T) {
	const qwen = `{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
		"num_key_value_heads": 2, "vocab_size": 100, %s}`
	for _, tc := range []struct{ fields, want string }{
		{`"num_hidden_layers": NaN`, `"num_hidden_layers" must be an integer (got NaN)`},
		{`"num_hidden_layers": Infinity`, `"num_hidden_layers" must be an integer (got Infinity)`},
		{`"num_hidden_layers": -Infinity`, `"num_hidden_layers" must be an integer (got -Infinity)`},
		{`"num_hidden_layers": "2"`, `"num_hidden_layers" must be an integer (got the string "2")`},
		{`"num_hidden_layers": 2, "rope_theta": NaN`, `"rope_theta" must be a number (got NaN)`},
		{`"num_hidden_layers": 2, "rope_theta": Infinity`, `"rope_theta" must be a number (got Infinity)`},
	} {
		_, err := FromConfig([]byte(strings.Replace(qwen, "%s", tc.fields, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %s", tc.fields, err, tc.want)
		}
	}
}
