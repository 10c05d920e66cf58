package importers

import "testing"

// TestAxolotlDPO: rl dpo or ipo is TRL 1.8's DPOTrainer; the reference is
// the policy without its adapters when an adapter trains (and no
// rl_adapter_ref_model), the adapters' precomputed log-probabilities with
// precompute_ref_log_probs, else Axolotl's reference copy; no rl, no
// preference.
func TestAxolotlDPO(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\n"
	const lora = base + "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n"
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"lora", lora + "rl: dpo\n", []string{`preference = dpo(reference = "adapters", trl = "1.8")`, "batch = 2,"}, nil},
		{"ipo", lora + "rl: ipo\nrl_beta: 0.1\n", []string{`preference = dpo(reference = "adapters", trl = "1.8")`}, nil},
		{"lora with a reference copy", lora + "rl: dpo\nrl_adapter_ref_model: true\n", []string{`preference = dpo(reference = "model", trl = "1.8")`}, nil},
		{"lora, precomputed", lora + "rl: dpo\nprecompute_ref_log_probs: true\n", []string{`preference = dpo(reference = "precomputed", trl = "1.8")`}, nil},
		{"full fine-tune", base + "rl: dpo\ndpo_loss_type: [sigmoid]\ndpo_label_smoothing: 0.1\n", []string{`preference = dpo(reference = "model", trl = "1.8")`}, nil},
		{"no rl", lora, nil, []string{"preference"}},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
}

func TestAxolotlDPOErrors(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nattn_implementation: flash_attention_2\n"
	const lora = base + "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n"
	o := Options{Model: "config.json"}
	runErrorCases(t, []errorCase{
		{name: "ORPO", file: "r.yml", config: lora + "rl: orpo\n", opts: o,
			want: "r.yml:9: key rl: not modelled: orpo (memsh replays DPOTrainer, rl dpo or ipo, KTOTrainer, rl kto, and GRPOTrainer, rl grpo or gdpo)", wantHint: "docs/grpo.md"},
		{name: "padding-free pairs", file: "r.yml", config: lora + "rl: dpo\ndpo_padding_free: true\n", opts: o,
			want: "r.yml:10: key dpo_padding_free: not modelled with rl: pairs packed without padding", wantHint: "Starlark"},
		{name: "Liger's DPO loss", file: "r.yml", config: lora + "rl: dpo\ndpo_use_liger_kernel: true\n", opts: o,
			want: "r.yml:10: key dpo_use_liger_kernel: not modelled with rl: Liger's chunked DPO loss", wantHint: "Starlark"},
		{name: "packed rows", file: "r.yml", config: lora + "rl: dpo\nsample_packing: true\nsequence_len: 2048\n", opts: o,
			want: "r.yml:10: key sample_packing: not modelled with rl: packed rows (TRL's collator pads each pair's rows)", wantHint: "Starlark"},
		{name: "a full fine-tune's precomputed reference", file: "r.yml", config: base + "rl: dpo\nprecompute_ref_log_probs: true\n", opts: o,
			want: "r.yml:6: key precompute_ref_log_probs: not modelled: Axolotl loads a reference copy of the model, which DPOTrainer keeps on the GPU though the precomputed log-probabilities skip its forward", wantHint: "leave it out"},
	})
}
