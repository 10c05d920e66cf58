package importers

import (
	"maps"
	"testing"
)

// TestJSONKeyLines: a JSON config's keys have their lines, as a YAML
// config's do, so that its errors name them (a DeepSpeed config's
// "train_batch_size": "auto" was "ds.json: key train_batch_size: is
// auto", with no line).
func TestJSONKeyLines(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      map[string]int
	}{
		{name: "flat", doc: "{\n  \"a\": 1,\n  \"b\": \"auto\"\n}\n", want: map[string]int{"a": 2, "b": 3}},
		{name: "nested", doc: "{\"fp16\": {\n  \"enabled\": \"auto\",\n  \"loss_scale\": 0},\n \"zero_optimization\": {\"stage\": 3,\n \"offload_param\": {\"device\": \"cpu\"}}}",
			want: map[string]int{"fp16": 1, "fp16.enabled": 2, "fp16.loss_scale": 3, "zero_optimization": 4, "zero_optimization.stage": 4, "zero_optimization.offload_param": 5, "zero_optimization.offload_param.device": 5}},
		{name: "lists hold no keys of the tree", doc: "{\"a\": [{\"x\": 1}, [2, {\"y\": 3}]],\n\"b\": {\"c\": []},\n\"d\": true}",
			want: map[string]int{"a": 1, "b": 2, "b.c": 2, "d": 3}},
		{name: "a key after an object value", doc: "{\"a\": {\"b\": {}},\n\"c\": 1}", want: map[string]int{"a": 1, "a.b": 1, "c": 2}},
		{name: "broken: what came before", doc: "{\"a\": 1,\n\"b\": ", want: map[string]int{"a": 1, "b": 2}},
		{name: "not an object", doc: "[1, 2]", want: map[string]int{}},
		{name: "a bare number", doc: "5", want: map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jsonKeyLines([]byte(tc.doc)); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
