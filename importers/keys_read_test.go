package importers

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKeysReadHarmless: keys real configs carry that memsh listed as not
// understood, each read from its trainer's source (the comments where
// each importer lists it): one that changes nothing replayed leaves the
// plan as it is without the key and is no longer listed; one that
// changes what memsh does not replay is listed as not modelled, with
// why. LLaMA-Factory's examples are the files themselves
// (examples/extras/dft, eaft).
func TestKeysReadHarmless(t *testing.T) {
	const hfArgs = "model_name_or_path: Qwen/Qwen3-8B\nper_device_train_batch_size: 1\nbf16: true\nmax_length: 2048\ngradient_checkpointing: true\n" +
		"fsdp: full_shard auto_wrap\nfsdp_config:\n  version: 1\n"
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	dft, eaft := read("llamafactory/qwen2_full_sft_dft.yaml"), read("llamafactory/qwen25_05b_eaft_full.yaml")
	for _, tc := range []struct {
		name        string
		with, bare  string // the config with the key, and without it
		opts        Options
		notModelled string // the note the key adds ("" for none)
	}{
		{name: "LLaMA-Factory's use_dft_loss", with: dft, bare: strings.Replace(dft, "use_dft_loss: true\n", "", 1)},
		{name: "LLaMA-Factory's use_eaft_loss", with: eaft, bare: strings.Replace(eaft, "use_eaft_loss: true\n", "", 1),
			notModelled: "use_eaft_loss: EAFT's entropy weights read a no_grad copy of the fp32 logits' labelled rows"},
		{name: "use_eaft_loss beside use_dft_loss", with: dft + "use_eaft_loss: true\n", bare: dft,
			notModelled: "use_eaft_loss: true beside use_dft_loss, whose loss LLaMA-Factory runs instead"},
		{name: "use_asft_loss beside use_dft_loss, and the losses' alphas", with: dft + "use_asft_loss: true\nasft_alpha: 0.2\neaft_alpha: 2.0\n", bare: dft},
		{name: "the Trainer's fsdp_config.use_orig_params", with: hfArgs + "  use_orig_params: true\n", bare: hfArgs, opts: Options{GPUs: 8}},
		{name: "the Trainer's fsdp_config.fsdp_use_orig_params", with: hfArgs + "  fsdp_use_orig_params: false\n", bare: hfArgs, opts: Options{GPUs: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with, err := Import("r.yaml", []byte(tc.with), defaults(tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			bare, err := Import("r.yaml", []byte(tc.bare), defaults(tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			if len(with.Unknown) > 0 {
				t.Errorf("not understood: %q", with.Unknown)
			}
			if got, want := planOf(with.Script), planOf(bare.Script); got != want {
				t.Errorf("the key changes the plan:\n%s\nwithout it:\n%s", got, want)
			}
			added := slices.DeleteFunc(slices.Clone(with.NotModelled), func(n string) bool { return slices.Contains(bare.NotModelled, n) })
			switch {
			case tc.notModelled == "" && len(added) > 0:
				t.Errorf("not modelled: %q", added)
			case tc.notModelled != "" && (len(added) != 1 || !strings.HasPrefix(added[0], tc.notModelled)):
				t.Errorf("not modelled %q, want one note %q...", added, tc.notModelled)
			}
		})
	}
}

// planOf is a script without its header's comments: the plan and main().
func planOf(script string) string {
	var b strings.Builder
	for _, l := range strings.Split(script, "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestAxolotlOrigParams: unfrozen_parameters under FSDP1 say that torch
// refuses a unit of mixed frozen and trainable parameters unless
// fsdp_config.use_orig_params is true (FSDP1's default false, as
// Axolotl's Spectrum plugin is refused); with it true, or under FSDP2, no
// note.
func TestAxolotlOrigParams(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\ngradient_checkpointing: true\nunfrozen_parameters:\n  - model.layers.1.self_attn.*\n"
	o := defaults(Options{GPUs: 8, Model: "config.json", ModelData: []byte(`{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 32000}`)})
	const note = "false (FSDP1's default) with unfrozen_parameters: torch refuses a wrapped unit whose parameters are partly frozen"
	for _, tc := range []struct {
		name, fsdp, want string
	}{
		{"FSDP1, unset", "fsdp_version: 1\nfsdp_config:\n  offload_params: false\n", "fsdp_config.use_orig_params: " + note},
		{"FSDP1, false", "fsdp_version: 1\nfsdp_config:\n  fsdp_use_orig_params: false\n", "fsdp_config.fsdp_use_orig_params: " + note},
		{"FSDP1, true", "fsdp_version: 1\nfsdp_config:\n  use_orig_params: true\n", ""},
		{"FSDP2", "fsdp_version: 2\nfsdp_config:\n  use_orig_params: false\n", ""},
	} {
		res, err := Import("r.yml", []byte(base+tc.fsdp), o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(res.Unknown) > 0 {
			t.Errorf("%s: not understood: %q", tc.name, res.Unknown)
		}
		has := slices.ContainsFunc(res.NotModelled, func(n string) bool { return strings.HasPrefix(n, tc.want) && strings.Contains(n, "use_orig_params") })
		if tc.want != "" && !has || tc.want == "" && slices.ContainsFunc(res.NotModelled, func(n string) bool { return strings.Contains(n, "use_orig_params") }) {
			t.Errorf("%s: not modelled %q, want %q", tc.name, res.NotModelled, tc.want)
		}
	}
}
