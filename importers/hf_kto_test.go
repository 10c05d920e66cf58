package importers

import "testing"

// TestHFKTO: a TRL KTOConfig (a key no SFTConfig has: beta,
// desirable_weight, ...) with memsh.trainer=kto is TRL's KTOTrainer: its
// loss_type (kto, with the KL forwards, or apo_zero_unpaired), the
// reference the policy without its adapters under use_peft, none with
// precompute_ref_log_probs, else a copy; the release memsh.trl's (absent:
// the current one, whose fused LM head KTO runs; 1.8.x its logits path).
func TestHFKTO(t *testing.T) {
	const kto = `{"per_device_train_batch_size": 4, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1", ` +
		`"max_length": 1024, "beta": 0.1, "desirable_weight": 1.0, "undesirable_weight": 1.33, "memsh.trainer": "kto"`
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"lora", kto + `, "use_peft": true, "lora_r": 16, "lora_alpha": 16}`,
			[]string{`preference = kto(loss = "kto", reference = "adapters", trl = "1.15")`, "batch = 4,", "seq = 1024,"}, []string{"loss_chunks", "dpo("}},
		{"full", kto + `}`, []string{`preference = kto(loss = "kto", reference = "model", trl = "1.15")`}, nil},
		{"precomputed", kto + `, "precompute_ref_log_probs": true}`, []string{`preference = kto(loss = "kto", reference = "precomputed", trl = "1.15")`}, nil},
		{"apo zero", kto + `, "loss_type": "apo_zero_unpaired"}`, []string{`preference = kto(loss = "apo_zero_unpaired", reference = "model", trl = "1.15")`}, nil},
		{"trl 1.8", kto + `, "memsh.trl": "1.8.0"}`, []string{`preference = kto(loss = "kto", reference = "model", trl = "1.8")`}, nil},
		{"trl 1.16", kto + `, "memsh.trl": "1.16.0"}`, []string{`trl = "1.15"`}, nil},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
	const bare = `{"bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1", "max_length": 1024, "beta": 0.1, "memsh.trainer": "kto"`
	o := Options{}
	runErrorCases(t, []errorCase{
		{name: "one row", file: "args.json", config: bare + `, "per_device_train_batch_size": 1}`, opts: o,
			want: "args.json:1: key per_device_train_batch_size: KTOTrainer refuses a per-device batch of 1 with loss_type kto: its KL term would be the implied reward", wantHint: "apo_zero_unpaired"},
		{name: "TRL 1.13", file: "args.json", config: bare + `, "per_device_train_batch_size": 2, "memsh.trl": "1.13.0"}`, opts: o,
			want: "args.json:1: key memsh.trl: KTOTrainer of TRL 1.13.0 is not modelled", wantHint: "1.8, or 1.15 and later"},
		{name: "unknown loss", file: "args.json", config: bare + `, "per_device_train_batch_size": 2, "loss_type": "bco"}`, opts: o,
			want: "args.json:1: key loss_type: unknown KTO loss bco", wantHint: "apo_zero_unpaired"},
		{name: "Liger", file: "args.json", config: bare + `, "per_device_train_batch_size": 2, "use_liger_kernel": true}`, opts: o,
			want: "args.json:1: key use_liger_kernel: not modelled with KTO: Liger's fused KTO loss (LigerFusedLinearKTOLoss)", wantHint: "docs/kto.md"},
		{name: "ORPO", file: "args.json", config: bare + `, "per_device_train_batch_size": 2, "memsh.trainer": "orpo"}`, opts: o,
			want: "args.json:1: key memsh.trainer: trainer orpo is not modelled", wantHint: "memsh.trainer=kto"},
	})
}
