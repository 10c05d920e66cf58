package importers

import "testing"

// TestAxolotlKTO: rl kto is TRL 1.8.0's KTOTrainer with its default loss
// (the KL forwards), the reference the policy with its adapters disabled;
// kto_desirable_weight and kto_undesirable_weight change nothing replayed,
// nor does precompute_ref_log_probs (Axolotl passes it to DPO alone).
func TestAxolotlKTO(t *testing.T) {
	const lora = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 4\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\nadapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n"
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"lora", lora + "rl: kto\n", []string{`preference = kto(loss = "kto", reference = "adapters", trl = "1.8")`, "batch = 4,"}, []string{"dpo("}},
		{"weights", lora + "rl: kto\nrl_beta: 0.1\nkto_desirable_weight: 1.0\nkto_undesirable_weight: 1.33\n",
			[]string{`preference = kto(loss = "kto", reference = "adapters", trl = "1.8")`}, nil},
		{"precompute ignored", lora + "rl: kto\nprecompute_ref_log_probs: true\n", []string{`reference = "adapters"`}, nil},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
}

func TestAxolotlKTOErrors(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\nattn_implementation: flash_attention_2\n"
	const lora = base + "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n"
	o := Options{Model: "config.json"}
	runErrorCases(t, []errorCase{
		{name: "full fine-tune", file: "r.yml", config: base + "rl: kto\n", opts: o,
			want: "r.yml:5: key rl: not modelled: kto without an adapter (Axolotl loads a reference model it hands no KTOTrainer, which loads its own copy in fp32)", wantHint: "adapter: lora"},
		{name: "a reference model beside the adapter", file: "r.yml", config: lora + "rl: kto\nrl_adapter_ref_model: true\n", opts: o,
			want: "r.yml:10: key rl_adapter_ref_model: not modelled with rl kto: Axolotl loads a reference model that KTOTrainer never reads (it disables the adapters)", wantHint: "docs/kto.md"},
		{name: "one row", file: "r.yml", config: "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nadapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nrl: kto\n", opts: o,
			want: "r.yml:2: key micro_batch_size: KTOTrainer refuses a per-device batch of 1: its KL term would be the implied reward", wantHint: "2 or more"},
		{name: "packed rows", file: "r.yml", config: lora + "rl: kto\nsample_packing: true\nsequence_len: 2048\n", opts: o,
			want: "r.yml:10: key sample_packing: not modelled with rl: packed rows (TRL's collator pads each pair's rows)", wantHint: "Starlark"},
	})
}
