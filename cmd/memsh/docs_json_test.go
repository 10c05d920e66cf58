package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fenced is the body of the first fence of text opened by open.
func fenced(t *testing.T, text, open string) string {
	t.Helper()
	i := strings.Index(text, open)
	if i < 0 {
		t.Fatalf("no %q fence", open)
	}
	body := text[i+len(open):]
	return body[:strings.Index(body, "```")]
}

// TestJSONDocValues runs docs/json.md's example script as memsh run
// --json does and holds the document the page shows to what it writes:
// every field the page shows, strings and integers exactly, times and
// rates to the page's rounding (0.1 %), the modules the page keeps (its
// first rows). builtins' TestJSONDocExample holds the page's document to
// the schema; this one holds its figures to the engine.
func TestJSONDocValues(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(docsRoot, "docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(md)
	// The script is the Python fence just before the JSON one.
	before := text[:strings.Index(text, "```json\n")]
	script := filepath.Join(t.TempDir(), "plans.star")
	if err := os.WriteFile(script, []byte(fenced(t, before[strings.LastIndex(before, "```python\n"):], "```python\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"run", "--json", script}, &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("docs/json.md's script exits %d: %s", code, errb.String())
	}
	var doc, got map[string]any
	if err := json.Unmarshal([]byte(fenced(t, text, "```json\n")), &doc); err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	delete(doc, "at") // the script's path differs: "plans.star:4:5" on the page
	var diffs []string
	jsonAgree("", doc, got, &diffs)
	for _, d := range diffs {
		t.Errorf("docs/json.md's example %s (regenerate it from memsh run --json on the page's script)", d)
	}
}

// jsonAgree appends to diffs where want (the page) and got (memsh) differ.
func jsonAgree(path string, want, got any, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: %v, memsh %v", path, want, got))
			return
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: memsh writes no such field", path, k))
				continue
			}
			jsonAgree(path+"."+k, v, gv, diffs)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d items on the page, memsh %v", path, len(w), got))
			return
		}
		for i := range w {
			jsonAgree(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], diffs)
		}
	case float64:
		g, ok := got.(float64)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: %v, memsh %v", path, want, got))
			return
		}
		// Integers (bytes, counts) exactly; the page rounds times and rates.
		if w == math.Trunc(w) && g == math.Trunc(g) && math.Abs(w) >= 1000 {
			if w != g {
				*diffs = append(*diffs, fmt.Sprintf("%s: %.0f, memsh %.0f", path, w, g))
			}
			return
		}
		if math.Abs(w-g) > 1e-3*math.Abs(g)+1e-12 {
			*diffs = append(*diffs, fmt.Sprintf("%s: %v, memsh %v", path, w, g))
		}
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %v, memsh %v", path, want, got))
		}
	}
}
