package sim

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/memsh/memsh/internal/hftest"
	"github.com/memsh/memsh/sim/hf"
)

// hfDefault is one line of testdata/hf_defaults.jsonl (one config of
// each model class hf_config builds, hf_names.py's CASES) or
// hf_defaults_all.jsonl (every other config under testdata/hf): what
// transformers builds from the config with one key left out
// (tools/oracle/hf_defaults.py: transformers 5.25.0, torch 2.15.0,
// on the meta device): its parameter count, or the error it raises. Drop
// is the key ("text_config.KEY" inside text_config), "" for the whole
// config.
type hfDefault struct {
	Config, Arch, Drop string
	Params             int64
	Error              string
}

// hfFromPretrained are the model types whose top-level
// tie_word_embeddings memsh reads as from_pretrained loads the
// checkpoint, where from_config on the meta device (hf_defaults.py) ties
// what the checkpoint stores apart: InternVL and Mistral 3, whose classes
// default it to True while their text configs default it to False (the
// head is tied when both say so: decoderWithTower, internvl.go,
// mistral3.go). Where a config leaves the key out, memsh builds the head
// untied, more parameters than from_config's.
var hfFromPretrained = map[string]bool{"internvl": true, "mistral3": true}

// checkHFDefaultsCover fails unless lines hold every config of
// hf_names.jsonl (hf_names.py's CASES: a family added there is added
// here too, by running hf_defaults.py again) and its keys.
func checkHFDefaultsCover(t *testing.T, lines []hfDefault) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range lines {
		if l.Drop == "" {
			have[l.Config] = true
		}
	}
	for _, tr := range readJSONL[hfTree](t, "hf_names.jsonl") {
		if !have[tr.Config] {
			t.Errorf("hf_defaults.jsonl has no line for %s (hf_names.py's CASES): run /work/venv-t/bin/python tools/oracle/hf_defaults.py > sim/testdata/hf_defaults.jsonl", tr.Config)
		}
	}
	if len(lines) < 2000 {
		t.Errorf("%d lines in hf_defaults.jsonl, not a config's every key", len(lines))
	}
}

// checkHFDefaultsFiles fails unless lines hold every config under
// testdata/hf (flops/ included): a config added there gets its lines in
// hf_defaults_all.jsonl (hf_defaults.py --only).
func checkHFDefaultsFiles(t *testing.T, lines []hfDefault) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range lines {
		have[l.Config] = true
	}
	var files []string
	for _, pattern := range []string{"testdata/hf/*.json", "testdata/hf/flops/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		rel, err := filepath.Rel("testdata/hf", f)
		if err != nil {
			t.Fatal(err)
		}
		if rel = filepath.ToSlash(rel); !have[rel] {
			t.Errorf("hf_defaults*.jsonl have no line for %s: run /work/venv-t/bin/python tools/oracle/hf_defaults.py --only %s >> sim/testdata/hf_defaults_all.jsonl", rel, rel)
		}
	}
}

// TestHFDefaultsAsTransformers: a config.json that leaves a key out gets
// the config class's default for it, as transformers gives it, or a clear
// refusal, never a silent other number (a missing n_routed_experts read
// as 0 built a dense model; a missing num_key_value_heads read as the
// attention heads, where MistralConfig's default is 8). For every config
// under testdata/hf and each of its keys (and text_config's, ...), memsh's
// parameter count without the key is transformers' or hf_config refuses
// the config; where transformers itself fails to build it, memsh must
// refuse it too.
func TestHFDefaultsAsTransformers(t *testing.T) {
	lines := readJSONL[hfDefault](t, "hf_defaults.jsonl")
	checkHFDefaultsCover(t, lines)
	lines = append(lines, readJSONL[hfDefault](t, "hf_defaults_all.jsonl")...)
	checkHFDefaultsFiles(t, lines)
	processors := hfTestProcessors()
	for _, l := range lines {
		data, name := readHF(t, l.Config), l.Config
		if l.Drop != "" {
			data, name = hftest.Edit(t, l.Config, map[string]any{l.Drop: hftest.Removed{}}), l.Config+" without "+l.Drop
		}
		raw := hftest.Decode(t, name, data)
		m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Arch: l.Arch, Processor: processors[l.Config]})
		switch {
		case err != nil && l.Drop == "" && l.Error == "":
			t.Errorf("%s: %v", name, err)
		case err != nil:
			// Refused: where transformers builds the class's default, a
			// refusal is allowed (never a silent number).
		case l.Error != "":
			t.Errorf("%s: memsh builds %d parameters, transformers refuses it (%s)", name, m.Params(), l.Error)
		case hfFromPretrained[fmt.Sprint(raw["model_type"])] && raw["tie_word_embeddings"] == nil:
			if m.Params() <= l.Params {
				t.Errorf("%s: memsh builds %d parameters, not more than transformers' tied %d: hfFromPretrained's untied head", name, m.Params(), l.Params)
			}
		case m.Params() != l.Params:
			t.Errorf("%s: memsh builds %d parameters, transformers %d (%+d)", name, m.Params(), l.Params, m.Params()-l.Params)
		}
	}
}
