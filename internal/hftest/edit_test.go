package hftest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Edit sets nested keys and keeps what it does not touch as the file has
// it: Python's float literals, numbers' text.
func TestEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	const file = `{"a": 1, "limit": [0.0, Infinity, -Infinity, NaN], "big": 12345678901234567890, "vision_config": {"heads": 4}}`
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit map[string]any
		want string
	}{
		{nil, `{"a":1,"big":12345678901234567890,"limit":[0.0,Infinity,-Infinity,NaN],"vision_config":{"heads":4}}`},
		{map[string]any{"vision_config.heads": 3}, `{"a":1,"big":12345678901234567890,"limit":[0.0,Infinity,-Infinity,NaN],"vision_config":{"heads":3}}`},
		{map[string]any{"a": nil, "vision_config.heads": []any{1, 1}}, `{"a":null,"big":12345678901234567890,"limit":[0.0,Infinity,-Infinity,NaN],"vision_config":{"heads":[1,1]}}`},
		{map[string]any{"a": Removed{}, "vision_config.heads": Removed{}}, `{"big":12345678901234567890,"limit":[0.0,Infinity,-Infinity,NaN],"vision_config":{}}`},
	} {
		if got := string(EditFile(t, path, tc.edit)); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.edit, got, tc.want)
		}
	}
	if got := Edit(t, "mamba-codestral-7b.json", map[string]any{"n_groups": 3}); !strings.Contains(string(got), `"n_groups":3`) ||
		!strings.Contains(string(got), "Infinity]") {
		t.Errorf("Edit of sim/testdata/hf/mamba-codestral-7b.json: %s", got)
	}
}
