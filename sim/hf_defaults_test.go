package sim

import (
	"os"
	"testing"

	"github.com/memsh/memsh/internal/hftest"
	"github.com/memsh/memsh/sim/hf"
)

// hfDefault is one line of testdata/hf_defaults.jsonl: what transformers
// builds from a config under testdata/hf with one key left out
// (tools/oracle/hf_defaults.py: transformers 5.25.0, torch 2.15.0,
// on the meta device): its parameter count, or the error it raises. Drop
// is the key ("text_config.KEY" inside text_config), "" for the whole
// config.
type hfDefault struct {
	Config, Arch, Drop string
	Params             int64
	Error              string
}

// hfFromPretrained are the keys whose absence memsh reads as
// from_pretrained loads the checkpoint, where from_config on the meta
// device (hf_defaults.py) ties what the checkpoint stores apart: the top
// level's tie_word_embeddings of InternVL and Mistral 3, whose classes
// default it to True while their text configs default it to False (the
// head is tied when both say so: decoderWithTower, internvl.go,
// mistral3.go).
var hfFromPretrained = map[[2]string]bool{
	{"internvl-rms-tiny.json", "tie_word_embeddings"}: true,
	{"mistral3-tiny.json", "tie_word_embeddings"}:     true,
}

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

// TestHFDefaultsAsTransformers: a config.json that leaves a key out gets
// the config class's default for it, as transformers gives it, or a clear
// refusal, never a silent other number (a missing n_routed_experts read
// as 0 built a dense model; a missing num_key_value_heads read as the
// attention heads, where MistralConfig's default is 8). For one config of
// each model class and each of its keys (and text_config's, ...), memsh's
// parameter count without the key is transformers' or hf_config refuses
// the config; where transformers itself fails to build it, memsh must
// refuse it too.
func TestHFDefaultsAsTransformers(t *testing.T) {
	var lines []hfDefault
	if survey := os.Getenv("MEMSH_HF_DEFAULTS"); survey != "" {
		lines = readJSONL[hfDefault](t, survey)
	} else {
		lines = readJSONL[hfDefault](t, "hf_defaults.jsonl")
		checkHFDefaultsCover(t, lines)
	}
	processors := hfTestProcessors()
	for _, l := range lines {
		data, name := readHF(t, l.Config), l.Config
		if l.Drop != "" {
			data, name = hftest.Edit(t, l.Config, map[string]any{l.Drop: hftest.Removed{}}), l.Config+" without "+l.Drop
		}
		m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Arch: l.Arch, Processor: processors[l.Config]})
		switch {
		case err != nil && l.Drop == "" && l.Error == "":
			t.Errorf("%s: %v", name, err)
		case err != nil:
			// Refused: where transformers builds the class's default, a
			// refusal is allowed (never a silent number).
		case l.Error != "":
			t.Errorf("%s: memsh builds %d parameters, transformers refuses it (%s)", name, m.Params(), l.Error)
		case hfFromPretrained[[2]string{l.Config, l.Drop}]:
			if m.Params() == l.Params {
				t.Errorf("%s: memsh now builds transformers' %d parameters: drop it from hfFromPretrained", name, l.Params)
			}
		case m.Params() != l.Params:
			t.Errorf("%s: memsh builds %d parameters, transformers %d (%+d)", name, m.Params(), l.Params, m.Params()-l.Params)
		}
	}
}
