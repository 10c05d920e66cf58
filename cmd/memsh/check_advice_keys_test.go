package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memsh/memsh/jsondoc"
)

// TestCheckAdviceInConfigKeys: memsh check's advice names the config's
// own keys beside memsh's keywords: a Trainer config's row that changes
// batch=N says per_device_train_batch_size: N in its config column, and
// grad_accum gradient_accumulation_steps (leftovers_s45: the advice spoke
// only of train()'s keywords to a user who wrote a trainer's YAML).
func TestCheckAdviceInConfigKeys(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"wide.json": `{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_layer": 2, "n_positions": 1024, "vocab_size": 50000}`,
		"args.yaml": "per_device_train_batch_size: 256\ngradient_accumulation_steps: 1\nbf16: true\nmax_length: 1024\ngradient_checkpointing: false\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"check", "--json", filepath.Join(dir, "args.yaml"), "--model", filepath.Join(dir, "wide.json"), "--gpu", "RTX-3090", "--top", "20"}, &out, &errb, func(string) string { return "" }); code != exitCheckNoFit {
		t.Fatalf("exit %d, want %d: %s", code, exitCheckNoFit, errb.String())
	}
	var table *jsondoc.Table
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var d jsondoc.Doc
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == jsondoc.KindTable {
			table = d.Table
		}
	}
	if table == nil || len(table.Rows) == 0 {
		t.Fatalf("no advice rows: %s", out.String())
	}
	batch, accum := regexp.MustCompile(`\bbatch=(\d+)`), regexp.MustCompile(`grad_accum=(\d+)`)
	seen := 0
	for _, row := range table.Rows {
		var change, config string
		if err := json.Unmarshal(row["change"], &change); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(row["config"], &config); err != nil {
			t.Fatalf("no config column: %v (%s)", err, row["config"])
		}
		if m := batch.FindStringSubmatch(change); m != nil {
			seen++
			if !strings.Contains(config, "per_device_train_batch_size: "+m[1]) || strings.Contains(config, "batch=") {
				t.Errorf("change %q: config %q, want per_device_train_batch_size: %s", change, config, m[1])
			}
		}
		if m := accum.FindStringSubmatch(change); m != nil && !strings.Contains(config, "gradient_accumulation_steps: "+m[1]) {
			t.Errorf("change %q: config %q, want gradient_accumulation_steps: %s", change, config, m[1])
		}
	}
	if seen == 0 {
		t.Errorf("no row changes the batch: %s", out.String())
	}
}
