package importers

import "testing"

// TestHFTRL: memsh.trl names the job's TRL release; from 1.15 SFTTrainer
// computes the loss through its fused LM head (loss_chunks="trl"), Liger's
// layer kernels beside it but not Liger's loss (SFTTrainer turns
// fused_linear_cross_entropy off); before 1.15, or without the key, the
// model's logits and cross-entropy.
func TestHFTRL(t *testing.T) {
	const sft = "model_name_or_path: mistralai/Mistral-7B-v0.1\nper_device_train_batch_size: 2\nmax_length: 1024\nbf16: true\ngradient_checkpointing: true\n"
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"1.16", sft + "memsh.trl: 1.16.0\n", []string{`loss_chunks = "trl"`}, []string{"liger"}},
		{"1.15 with Liger", sft + "memsh.trl: 1.15.0\nuse_liger_kernel: true\n", []string{`loss_chunks = "trl"`, "liger_kernels = True"}, []string{`"liger"`}},
		{"2.0", sft + "memsh.trl: 2.0.1\n", []string{`loss_chunks = "trl"`}, nil},
		{"1.14", sft + "memsh.trl: 1.14.2\n", nil, []string{"loss_chunks"}},
		{"unsaid", sft, nil, []string{"loss_chunks"}},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
	const args = `{"per_device_train_batch_size": 4, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1"`
	runErrorCases(t, []errorCase{
		{name: "a number", file: "args.json", config: args + `, "memsh.trl": 1.1}`, opts: Options{Seq: 512},
			want: "args.json:1: key memsh.trl: want a TRL release such as 1.16.0, got 1.1", wantHint: "pip show trl"},
		{name: "not a release", file: "args.json", config: args + `, "memsh.trl": "latest"}`, opts: Options{Seq: 512},
			want: "args.json:1: key memsh.trl: want a TRL release such as 1.16.0, got latest", wantHint: "pip show trl"},
		{name: "under FSDP", file: "args.json", config: args + `, "memsh.trl": "1.16.0", "fsdp": "full_shard auto_wrap"}`, opts: Options{Seq: 512, GPUs: 8},
			want: "args.json:1: key memsh.trl: TRL 1.15's fused LM head under ZeRO-3 or FSDP (lm_head.weight gathered around the head) is not modelled", wantHint: "leave memsh.trl out"},
	})
}
