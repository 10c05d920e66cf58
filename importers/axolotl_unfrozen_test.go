package importers

import "testing"

// TestAxolotlLayerPattern: LayerNamePattern's name regex (utils/freeze.py
// at 067b021c8): a trailing [start:end] range dropped, each dot not
// followed by "+" made literal.
func TestAxolotlLayerPattern(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ranged   bool
	}{
		{"model.language_model.*", `model\.language_model\.*`, false},
		{"lm_head", "lm_head", false},
		{"^model.embed_tokens.weight$[:32000]", `^model\.embed_tokens\.weight$`, true},
		{"layers.2[0-9]+.block_sparse_moe.gate.[a-z]+$", `layers\.2[0-9]+\.block_sparse_moe\.gate\.[a-z]+$`, false},
		{"model.layers.1[0-5]", `model\.layers\.1[0-5]`, false},
		{"a.+b", "a.+b", false},
	} {
		got, ranged := axolotlLayerPattern(tc.in)
		if got != tc.want || ranged != tc.ranged {
			t.Errorf("%q: %q (range %v), want %q (range %v)", tc.in, got, ranged, tc.want, tc.ranged)
		}
	}
}

// TestAxolotlUnfrozen: unfrozen_parameters is train(trainable=) over the
// config.json's model; a pattern naming lm_head or embed_tokens adds
// enable_input_require_grads (train.py), so the checkpoint computes its
// input's gradient.
func TestAxolotlUnfrozen(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\ngradient_checkpointing: true\n"
	o := Options{Model: "config.json", ModelData: []byte(`{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 32000}`)}
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"layers", base + "unfrozen_parameters:\n  - model.layers.1.*\n", []string{`trainable = ["model\\.layers\\.1\\.*"]`}, []string{"input_requires_grad"}},
		{"the head", base + "unfrozen_parameters:\n  - model.layers.1.*\n  - lm_head\n", []string{`trainable = ["model\\.layers\\.1\\.*", "lm_head"]`, "input_requires_grad = True"}, nil},
		{"none", base, nil, []string{"trainable"}},
	} {
		checkImportedScript(t, tc.name, tc.config, o, tc.want, tc.not)
	}
	base8 := "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nattn_implementation: flash_attention_2\n"
	runErrorCases(t, []errorCase{
		{name: "the zoo's model", file: "r.yml", config: base8 + "unfrozen_parameters:\n  - lm_head\n", opts: Options{},
			want: "r.yml:6: key unfrozen_parameters: names the checkpoint's parameters as transformers names them (model.layers.0...), which memsh reads from the model's config.json, not its zoo", wantHint: "--model"},
		{name: "with an adapter", file: "r.yml", config: base8 + "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nunfrozen_parameters:\n  - lm_head\n", opts: o,
			want: "r.yml:10: key unfrozen_parameters: with adapter lora is not modelled: Axolotl applies it to the PEFT model, whose parameters are named base_model.model...", wantHint: "Starlark"},
		{name: "a lookahead", file: "r.yml", config: base8 + "unfrozen_parameters:\n  - model(?=.layers)\n", opts: o,
			want: "r.yml:6: key unfrozen_parameters: pattern \"model(?=.layers)\" is not a regular expression memsh reads: error parsing regexp: invalid or unsupported Perl syntax: `(?=`", wantHint: "RE2"},
	})
}
