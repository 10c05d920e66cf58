package hftest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pythonFloats are the literals Python's json writes for the floats JSON
// has none for (Mamba-2's "time_step_limit": [0.0, Infinity]), each
// carried through the edit as a string of its own (no string holds one
// literal inside another); -Infinity before Infinity, which it contains.
var pythonFloats = []struct{ literal, carried string }{
	{"-Infinity", `"memsh-hftest-negative-inf"`},
	{"Infinity", `"memsh-hftest-inf"`},
	{"NaN", `"memsh-hftest-nan"`},
}

// Decode reads a config.json as written (numbers keep their text,
// Python's float literals carried as strings of their own); name names
// it in a failure.
func Decode(t testing.TB, name string, data []byte) map[string]any {
	t.Helper()
	text := string(data)
	for _, f := range pythonFloats {
		text = strings.ReplaceAll(text, f.literal, f.carried)
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return raw
}

// Removed as an edit's value takes the key out of the config, as a
// config.json that never said it: transformers then takes its config
// class's default, where null sets None.
type Removed struct{}

// Edit reads sim/testdata/hf/file and sets each key of edit (EditFile).
func Edit(t testing.TB, file string, edit map[string]any) []byte {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for { // a test runs in its package's folder, below the module's
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = up
	}
	return EditFile(t, filepath.Join(dir, "sim", "testdata", "hf", file), edit)
}

// EditFile reads the config.json at path and sets each key of edit, a
// path through nested objects ("text_config.linear_num_key_heads"); a
// nil value writes null, Removed{} takes the key out. A key the file does not have fails the test: an
// edit must change what the file says. Numbers keep their text.
func EditFile(t testing.TB, path string, edit map[string]any) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw := Decode(t, path, data)
	for key, v := range edit {
		obj, keys := raw, strings.Split(key, ".")
		for _, k := range keys[:len(keys)-1] {
			next, ok := obj[k].(map[string]any)
			if !ok {
				t.Fatalf("%s has no object %q", path, k)
			}
			obj = next
		}
		if _, ok := obj[keys[len(keys)-1]]; !ok {
			t.Fatalf("%s has no %q to edit", path, key)
		}
		if _, out := v.(Removed); out {
			delete(obj, keys[len(keys)-1])
			continue
		}
		obj[keys[len(keys)-1]] = v
	}
	out, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range pythonFloats {
		out = bytes.ReplaceAll(out, []byte(f.carried), []byte(f.literal))
	}
	return out
}
