package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's first example must keep running: it is the first thing a
// new user copies.
func TestReadmeExampleRuns(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "```python\n")
	if start < 0 {
		t.Fatal("README has no python example")
	}
	body := text[start+len("```python\n"):]
	body = body[:strings.Index(body, "```")]
	script := filepath.Join(t.TempDir(), "readme.star")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"run", script}, &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("README example exits %d: %s", code, errb.String())
	}
	for _, want := range []string{"llama-2-7b on H100-80GB", "peak allocated", "8 GPUs:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("README example output lacks %q:\n%s", want, out.String())
		}
	}
}
