package importers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	yaml "go.yaml.in/yaml/v3"
)

// yamlLine is the line yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^not valid YAML: line (\d+): (.*)$`)

// maxDepth bounds how deep a config nests; real ones nest a handful of
// levels.
const maxDepth = 64

// parseYAML reads a YAML document into a tree, each key with its line.
func parseYAML(file string, data []byte) (*tree, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		e := &Error{File: file, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(e.Msg); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = "not valid YAML: " + m[2]
		}
		return nil, e
	}
	t := newTree(file)
	if doc.Kind == 0 { // empty file
		return t, nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: root.Line, Msg: "want a mapping of keys at the top of the file"}
	}
	if err := t.addYAML("", root, 0); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tree) addYAML(prefix string, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return &Error{File: t.file, Line: n.Line, Key: prefix, Msg: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.MappingNode && len(n.Content) > 0 {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Value == "" {
				return &Error{File: t.file, Line: k.Line, Key: prefix, Msg: "a key is empty"}
			}
			if err := t.addYAML(join(prefix, k.Value), n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return &Error{File: t.file, Line: n.Line, Key: prefix, Msg: err.Error()}
	}
	v, err := normalise(v, depth)
	if err != nil {
		return &Error{File: t.file, Line: n.Line, Key: prefix, Msg: err.Error()}
	}
	t.leaves[prefix] = leaf{value: v, line: n.Line}
	return nil
}

// parseTOML reads a TOML document into a tree.
func parseTOML(file string, data []byte) (*tree, error) {
	var m map[string]any
	if _, err := toml.Decode(string(data), &m); err != nil {
		return nil, &Error{File: file, Msg: "not valid TOML: " + err.Error()}
	}
	return fromMap(file, m)
}

// parseJSON reads a JSON object into a tree.
func parseJSON(file string, data []byte) (*tree, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, &Error{File: file, Msg: "not a valid JSON object: " + err.Error()}
	}
	if dec.More() {
		return nil, &Error{File: file, Msg: "more than one JSON value in the file"}
	}
	t, err := fromMap(file, m)
	if err != nil {
		return nil, err
	}
	for k, line := range jsonKeyLines(data) {
		if l, ok := t.leaves[k]; ok {
			l.line = line
			t.leaves[k] = l
		}
	}
	return t, nil
}

func fromMap(file string, m map[string]any) (*tree, error) {
	v, err := normalise(m, 0)
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	t := newTree(file)
	t.add("", v, 0)
	delete(t.leaves, "") // an empty document
	return t, nil
}

// normalise turns decoded values into the tree's types: int64 and float64
// numbers, []any and map[string]any.
func normalise(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x, nil
	case int:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return float64(x), nil
		}
		return int64(x), nil
	case float64:
		return x, nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil && !math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return f, nil // beyond float64, ±Inf, as Python's json reads it (and hf.PythonJSON writes its Infinity)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalise(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case []map[string]any: // TOML arrays of tables
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalise(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalise(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalise(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = n
		}
		return out, nil
	}
	return fmt.Sprint(v), nil // dates and times: strings, which no importer reads as numbers
}

// parseScalar reads a command-line override's value as YAML does
// (4, 2e-5, true, null, bf16, [q_proj, v_proj]).
func parseScalar(s string) (any, error) {
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return s, nil // not YAML: the text itself
	}
	if _, ok := v.(map[string]any); ok {
		return nil, fmt.Errorf("value %s is a mapping; override its keys one at a time", quoteKey(s))
	}
	return normalise(v, 0)
}
