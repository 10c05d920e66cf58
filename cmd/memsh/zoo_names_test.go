package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memsh/memsh/importers"
)

// TestHubModelsBuild: every Hub id memsh check serves from the zoo
// (importers.HubModels) builds a model, and where sim/testdata/hf holds
// that checkpoint's own config.json the zoo's model has the parameters
// hf_config builds from it.
func TestHubModelsBuild(t *testing.T) {
	own := map[string]string{ // Hub id -> its config.json in sim/testdata/hf
		"meta-llama/Llama-2-7b-hf":         "llama-2-7b.json",
		"meta-llama/Llama-2-70b-hf":        "llama-2-70b.json",
		"meta-llama/Meta-Llama-3-8B":       "llama-3-8b.json",
		"meta-llama/Llama-3.1-70B":         "llama-3.1-70b.json",
		"mistralai/Mistral-7B-v0.1":        "mistral-7b-v0.1.json",
		"microsoft/Phi-3-mini-4k-instruct": "phi-3-mini-4k.json",
		"Qwen/Qwen2-7B":                    "qwen2-7b.json",
		"Qwen/Qwen3-8B":                    "qwen3-8b.json",
		"google/gemma-7b":                  "gemma-7b.json",
	}
	hfDir, err := filepath.Abs(filepath.Join("..", "..", "sim", "testdata", "hf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b strings.Builder
	fns := map[string]bool{}
	for _, id := range importers.HubModels() {
		fn, _, _ := importers.ZooModel(id)
		fns[fn] = true
	}
	for fn := range fns {
		fmt.Fprintf(&b, "load(\"@stdlib//llm.star\", %q)\n", fn)
	}
	for _, id := range importers.HubModels() {
		fn, size, _ := importers.ZooModel(id)
		fmt.Fprintf(&b, "print(%q, %s(%q).params)\n", id, fn, size)
		if cfg, ok := own[id]; ok {
			fmt.Fprintf(&b, "print(%q, hf_config(%q).params)\n", id+" hf_config", filepath.Join(hfDir, cfg))
		}
	}
	script := filepath.Join(dir, "zoo.star")
	if err := os.WriteFile(script, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--allow-read", hfDir, "run", script}, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	params := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		i := strings.LastIndexByte(line, ' ')
		params[line[:i]] = line[i+1:]
	}
	for _, id := range importers.HubModels() {
		if p := params[id]; p == "" || p == "0" {
			t.Errorf("%s: the zoo's model has %q parameters", id, p)
		}
		if _, ok := own[id]; ok && params[id] != params[id+" hf_config"] {
			t.Errorf("%s: the zoo's model has %s parameters, hf_config on its config.json %s", id, params[id], params[id+" hf_config"])
		}
	}
	if len(params) != len(importers.HubModels())+len(own) {
		t.Errorf("%d lines for %d ids and %d config.json files:\n%s", len(params), len(importers.HubModels()), len(own), stdout.String())
	}
}
