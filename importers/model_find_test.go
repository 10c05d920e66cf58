package importers

import (
	"errors"
	"strings"
	"testing"
)

// TestFindModel: memsh check asks Options.FindModel for the model a
// config names only when --model gives none and the zoo has no model of
// that name; what it finds is the plan's model, where it looked is the
// error's hint, and what it cannot read is an error at the config's key.
func TestFindModel(t *testing.T) {
	const tiny = `{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "dtype": "bfloat16"}`
	axolotl := "base_model: %s\nmicro_batch_size: 1\ngradient_accumulation_steps: 1\nsequence_len: 512\ndatasets: []\nbf16: true\nflash_attention: true\n"
	hf := "model_name_or_path: %s\nper_device_train_batch_size: 1\nmax_length: 512\nbf16: true\ngradient_checkpointing: false\n"
	for _, tc := range []struct {
		name, config, model string // model: --model
		found               FoundModel
		err                 error
		asked               bool   // FindModel is called
		want                string // in the script or the error
		from                string // Result.ModelFrom
	}{
		{name: "found", config: axolotl, model: "", found: FoundModel{Path: "m/config.json", Data: []byte(tiny), From: "the model folder m"},
			asked: true, want: `hf_config("m/config.json"`, from: "the model folder m"},
		{name: "hf found", config: hf, found: FoundModel{Path: "/c/config.json", Data: []byte(tiny), From: "the Hugging Face cache"},
			asked: true, want: `hf_config("/c/config.json"`, from: "the Hugging Face cache"},
		{name: "not found", config: axolotl, found: FoundModel{Looked: "memsh looked in the Hugging Face cache, /h: not there"},
			asked: true, want: "--model config.json; memsh looked in the Hugging Face cache, /h: not there"},
		{name: "unreadable", config: axolotl, err: errors.New("the model folder m: m/config.json: path escapes from parent"),
			asked: true, want: "key base_model: the model folder m: m/config.json: path escapes from parent"},
		{name: "--model first", config: axolotl, model: "given.json", want: `hf_config("given.json"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "org/model"
			asked := false
			o := defaults(Options{FindModel: func(n string) (FoundModel, error) {
				if n != name {
					t.Errorf("FindModel(%q), want %q", n, name)
				}
				asked = true
				return tc.found, tc.err
			}})
			if tc.model != "" {
				o.Model, o.ModelData = tc.model, []byte(tiny)
			}
			file := "c.yml"
			res, err := Import(file, []byte(strings.Replace(tc.config, "%s", name, 1)), o)
			got := ""
			switch {
			case err != nil:
				var e *Error
				if errors.As(err, &e) {
					got = err.Error() + "; " + e.Hint
				}
			default:
				got = res.Script
				if res.ModelFrom != tc.from {
					t.Errorf("ModelFrom %q, want %q", res.ModelFrom, tc.from)
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, got)
			}
			if asked != tc.asked {
				t.Errorf("FindModel called: %v, want %v", asked, tc.asked)
			}
		})
	}
	// A model of the zoo is the zoo's: nothing is looked for.
	o := defaults(Options{FindModel: func(string) (FoundModel, error) {
		t.Error("FindModel called for a zoo model")
		return FoundModel{}, nil
	}})
	if _, err := Import("c.yml", []byte(strings.Replace(axolotl, "%s", "meta-llama/Meta-Llama-3-8B", 1)), o); err != nil {
		t.Fatal(err)
	}
}
