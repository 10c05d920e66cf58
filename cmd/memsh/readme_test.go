package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// The README's chart example rings more than one point: its x and y make
// a trade-off (issue 24 item 11; x="batch", y="peak_allocated" rang only
// the smallest batch).
func TestReadmeParetoExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`emit\\(t, x=\"(\\w+)\", y=\"(\\w+)\", by=\"(\\w+)\", pareto=True\\)`").FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal("README has no emit(t, x=..., y=..., by=..., pareto=True) example")
	}
	script := filepath.Join(t.TempDir(), "pareto.star")
	src := fmt.Sprintf(`
blk = sequential(residual(sequential(rmsnorm(1024), attention(1024, 16))), residual(sequential(rmsnorm(1024), mlp(1024, 4096, act = "swiglu"))))
m = model("small", embedding(32000, 1024), repeat(blk, 8), rmsnorm(1024), vocab = 32000)
t = sweep(train(m, seq = 2048, precision = "bf16-mixed", gpu = "A100-80GB"), batch = [1, 2, 4, 8], checkpoint = ["none", "full"])
print(len(t.filter(lambda r: r["fits"]).pareto(%q, %q)))
emit(t, x = %q, y = %q, by = %q, pareto = True)
`, m[1], m[2], m[1], m[2], m[3])
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"run", "--json", script}, &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.TrimSpace(errb.String()); n == "0" || n == "1" {
		t.Errorf("the README's Pareto example (x=%s, y=%s) rings %s point", m[1], m[2], n)
	}
}

// readmeBlock is a fenced block of the README: its language ("" for
// output quoted as memsh prints it) and its text.
type readmeBlock struct {
	lang, body string
	line       int // where the fence opens
}

// readmeBlocks reads the README's fenced blocks in order.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var open *readmeBlock
	for i, l := range strings.Split(string(readme), "\n") {
		switch {
		case open == nil && strings.HasPrefix(l, "```"):
			open = &readmeBlock{lang: strings.TrimPrefix(l, "```"), line: i + 1}
		case open != nil && l == "```":
			blocks = append(blocks, *open)
			open = nil
		case open != nil:
			open.body += l + "\n"
		}
	}
	if open != nil {
		t.Fatalf("README.md:%d: the fence is never closed", open.line)
	}
	return blocks
}

// Every Python example of the README runs as a user would paste it: one
// with its own load() alone, the others after the first example, which
// defines the plan they use (issue 24: the README's examples agree with
// what memsh does).
func TestReadmeScriptsRun(t *testing.T) {
	var first string
	n := 0
	for _, b := range readmeBlocks(t) {
		if b.lang != "python" {
			continue
		}
		src := b.body
		if first == "" {
			first = src
		} else if !strings.Contains(src, "load(") {
			src = first + src
		}
		n++
		dir := t.TempDir()
		script := filepath.Join(dir, "readme.star")
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"run", script}, &out, &errb, func(string) string { return "" }); code != 0 {
			t.Errorf("README.md:%d: the example exits %d: %s", b.line, code, errb.String())
		}
	}
	if n < 2 {
		t.Fatalf("README has %d Python examples; this test expects several", n)
	}
}

// Output the README quotes (a fence without a language) is what memsh
// prints: each line is in a reviewed golden of testdata/scripts, "..."
// standing for text the README leaves out.
func TestReadmeOutputsQuoted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "scripts", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	var goldens strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		goldens.Write(b)
	}
	n := 0
	for _, b := range readmeBlocks(t) {
		if b.lang != "" {
			continue
		}
		for i, l := range strings.Split(strings.TrimRight(b.body, "\n"), "\n") {
			parts := strings.Split(l, "...")
			for j := range parts {
				parts[j] = regexp.QuoteMeta(parts[j])
			}
			re := regexp.MustCompile("(?m)^" + strings.Join(parts, ".*") + "$")
			if !re.MatchString(goldens.String()) {
				t.Errorf("README.md:%d: memsh prints no such line in testdata/scripts: %s", b.line+1+i, l)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("README quotes no output; this test expects some")
	}
}
