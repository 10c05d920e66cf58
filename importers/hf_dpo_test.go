package importers

import "testing"

// TestHFDPO: a TRL DPOConfig (a key no SFTConfig has: beta, ...) is read
// as TRL's DPOTrainer once memsh.trainer=dpo says so: the reference the
// policy without its adapters under use_peft, none with
// precompute_ref_log_probs, else a copy; the release memsh.trl's (absent:
// the current one, whose fused LM head DPO runs).
func TestHFDPO(t *testing.T) {
	const dpo = `{"per_device_train_batch_size": 2, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1", ` +
		`"max_length": 1024, "max_prompt_length": 512, "beta": 0.1, "loss_type": ["sigmoid"], "memsh.trainer": "dpo"`
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"lora", dpo + `, "use_peft": true, "lora_r": 16, "lora_alpha": 16}`, []string{`preference = dpo(reference = "adapters", trl = "1.15")`, "batch = 2,", "seq = 1024,"}, []string{"loss_chunks"}},
		{"full", dpo + `}`, []string{`preference = dpo(reference = "model", trl = "1.15")`}, nil},
		{"precomputed", dpo + `, "precompute_ref_log_probs": true}`, []string{`preference = dpo(reference = "precomputed", trl = "1.15")`}, nil},
		{"trl 1.10", dpo + `, "memsh.trl": "1.10.0"}`, []string{`preference = dpo(reference = "model", trl = "1.8")`}, nil},
		{"trl 1.16", dpo + `, "memsh.trl": "1.16.0"}`, []string{`trl = "1.15"`}, []string{"loss_chunks"}},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
	const bare = `{"per_device_train_batch_size": 2, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1", "max_length": 1024`
	o := Options{}
	runErrorCases(t, []errorCase{
		{name: "the trainer unsaid", file: "args.json", config: bare + `, "beta": 0.1}`, opts: o,
			want: "args.json:1: key beta: is a key of TRL's preference trainers (DPO, KTO, ORPO, CPO), not of SFT", wantHint: "memsh.trainer=dpo"},
		{name: "CPO", file: "args.json", config: bare + `, "beta": 0.1, "memsh.trainer": "cpo"}`, opts: o,
			want: "args.json:1: key memsh.trainer: trainer cpo is not modelled", wantHint: "memsh.trainer=dpo"},
		{name: "TRL 1.14", file: "args.json", config: bare + `, "beta": 0.1, "memsh.trainer": "dpo", "memsh.trl": "1.14.2"}`, opts: o,
			want: "args.json:1: key memsh.trl: DPOTrainer of TRL 1.14.2 is not modelled", wantHint: "1.8 to 1.13"},
		{name: "padding-free", file: "args.json", config: bare + `, "beta": 0.1, "memsh.trainer": "dpo", "padding_free": true}`, opts: o,
			want: "args.json:1: key padding_free: not modelled with DPO: pairs packed without padding", wantHint: "docs/dpo.md"},
		{name: "RPO", file: "args.json", config: bare + `, "beta": 0.1, "memsh.trainer": "dpo", "rpo_alpha": 1.0}`, opts: o,
			want: "args.json:1: key rpo_alpha: not modelled with DPO: RPO's NLL term on the chosen rows", wantHint: "docs/dpo.md"},
	})
}
