package importers

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDidYouMean imports real configs (importers/testdata) with one key
// misspelt, as a user writes it: the misspelt key is still listed as not
// understood, now with the key the trainer reads, or, when the trainer
// needs the key, the error's hint names the misspelt one.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		name, file, from, to string
		opts                 Options
		want                 map[string]string // DidYouMean
		errHint              string            // the error's hint, when the import fails
	}{
		{name: "hf json", file: "hf/trainer_gc.json", from: `"gradient_checkpointing"`, to: `"gradient_checkpoiting"`,
			opts: Options{Seq: 2048}, want: map[string]string{"gradient_checkpoiting": "gradient_checkpointing"}},
		{name: "trl yaml", file: "hf/zephyr_sft_qlora.yaml", from: "gradient_accumulation_steps:", to: "gradient_acumulation_steps:",
			want: map[string]string{"gradient_acumulation_steps": "gradient_accumulation_steps"}},
		{name: "torchtitan toml", file: "torchtitan/llama3_8b.toml", from: "local_batch_size", to: "local_batch_sise",
			opts: Options{GPUs: 8}, want: map[string]string{"training.local_batch_sise": "training.local_batch_size"}},
		{name: "megatron flag", file: "megatron/train_llama3_8b_h100_fp8.sh", from: "--sequence-parallel", to: "--sequence-paralel",
			opts: Options{GPUs: 8}, want: map[string]string{"sequence-paralel": "sequence-parallel"}},
		{name: "megatron required flag", file: "megatron/train_llama3_8b_h100_fp8.sh", from: "--micro-batch-size", to: "--micro-batch-sise",
			opts:    Options{GPUs: 8},
			errHint: "Megatron requires it: --micro-batch-size 1 (the config has micro-batch-sise: a typo?)"},
		{name: "deepspeed stage", file: "deepspeed/zero_offload_tutorial.json", from: `"stage"`, to: `"stgae"`,
			opts:    Options{Model: "config.json", Seq: 2048, Overrides: []string{"train_micro_batch_size_per_gpu=2"}},
			errHint: "DeepSpeed offloads the optimizer from ZeRO stage 1 (the config has zero_optimization.stgae: a typo?)"},
		// A misspelt override on the command line: the file's key is read,
		// with the file's value.
		{name: "override", file: "torchtitan/llama3_8b.toml", from: "[training]", to: "[training]",
			opts: Options{GPUs: 8, Overrides: []string{"training.local_batch_sise=4"}},
			want: map[string]string{"training.local_batch_sise": "training.local_batch_size"}},
		// A key near none the trainer reads gets no suggestion.
		{name: "far from every key", file: "hf/trainer_gc.json", from: `"gradient_checkpointing"`, to: `"fancy_feature"`,
			opts: Options{Seq: 2048}, want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tc.from) {
				t.Fatalf("%s has no %s", tc.file, tc.from)
			}
			data = []byte(strings.Replace(string(data), tc.from, tc.to, 1))
			res, err := Import(tc.file, data, defaults(tc.opts))
			if tc.errHint != "" {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, want an *Error", err)
				}
				if e.Hint != tc.errHint {
					t.Errorf("hint %q, want %q", e.Hint, tc.errHint)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res.DidYouMean); diff != "" {
				t.Errorf("did you mean (-want +got):\n%s", diff)
			}
			for k, v := range tc.want {
				if !strings.Contains(res.Script, "#   "+k+" (did you mean "+v+"?)\n") {
					t.Errorf("the script's header does not suggest %s for %s:\n%s", v, k, res.Script)
				}
			}
		})
	}
}

// TestNearKey: typos within two edits (one for short keys), case and _/-
// ignored; nothing for a key the candidates are far from.
func TestNearKey(t *testing.T) {
	known := []string{"tp", "pp", "training.local_batch_size", "micro-batch-size", "gradient_accumulation_steps"}
	for _, tc := range []struct{ key, want string }{
		{"training.local_batch_sise", "training.local_batch_size"},
		{"micro_batch_size", "micro-batch-size"},
		{"Gradient_Acumulation_Steps", "gradient_accumulation_steps"},
		{"micro-batch-sizes", "micro-batch-size"},
		{"ep", ""}, // one edit from tp and pp, but too short to tell a typo
		{"dp_shard", ""},
		{"micro-batch-size", ""}, // the key itself is no suggestion
	} {
		if got := nearKey(tc.key, known); got != tc.want {
			t.Errorf("nearKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
