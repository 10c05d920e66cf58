package importers

import "testing"

// TestAxolotlGRPO: rl grpo (or gdpo) is TRL 1.8's GRPOTrainer, the trl:
// block's keys written as grpo(..., trl = "1.8"): max_completion_length,
// beta (trl.beta, else rl_beta), use_vllm with vllm_mode (colocate unless
// said), the vllm: block's gpu_memory_utilization (Axolotl's 0.9) and
// vllm_enable_sleep_mode; the row is --seq.
func TestAxolotlGRPO(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 4\ngradient_accumulation_steps: 2\nsequence_len: 512\n" +
		"attn_implementation: flash_attention_2\nbf16: true\ngradient_checkpointing: true\n"
	const lora = base + "adapter: lora\nlora_r: 16\nlora_alpha: 32\nlora_target_linear: true\nrl: grpo\n"
	seq := Options{Seq: 1536}
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"lora, transformers' generate", lora + "trl:\n  max_completion_length: 1024\n  num_generations: 8\n  temperature: 0.7\n  reward_funcs: [rewards.accuracy_reward]\n",
			[]string{`preference = grpo(completion = 1024, trl = "1.8")`, "batch = 4,", "seq = 1536,", `checkpoint = checkpoint("full"`}, nil},
		{"beta and colocate", lora + "trl:\n  max_completion_length: 512\n  beta: 0.04\n  use_vllm: true\n",
			[]string{`preference = grpo(completion = 512, beta = 0.04, vllm = "colocate", vllm_memory = 0.9, trl = "1.8")`}, nil},
		{"rl_beta, colocate asleep at 0.5", lora + "rl_beta: 0.1\nvllm:\n  gpu_memory_utilization: 0.5\n  max_model_len: 2048\ntrl:\n  max_completion_length: 512\n  use_vllm: true\n  vllm_mode: colocate\n  vllm_enable_sleep_mode: true\n",
			[]string{`preference = grpo(completion = 512, beta = 0.1, vllm = "colocate", vllm_memory = 0.5, sleep = True, trl = "1.8")`}, nil},
		{"server", lora + "vllm:\n  host: 0.0.0.0\n  port: 8000\n  gpu_memory_utilization: 0.85\ntrl:\n  max_completion_length: 256\n  use_vllm: true\n  vllm_mode: server\n  vllm_server_host: 0.0.0.0\n",
			[]string{`preference = grpo(completion = 256, vllm = "server", trl = "1.8")`}, []string{"vllm_memory"}},
		{"generation batch size", lora + "trl:\n  max_completion_length: 512\n  generation_batch_size: 32\n",
			[]string{`preference = grpo(completion = 512, generation_batch_size = 32, trl = "1.8")`}, nil},
		{"generation batch size under vLLM", lora + "trl:\n  max_completion_length: 512\n  generation_batch_size: 32\n  use_vllm: true\n  vllm_mode: server\n",
			[]string{`preference = grpo(completion = 512, vllm = "server", trl = "1.8")`}, []string{"generation_batch_size ="}},
		{"gdpo", lora + "trl:\n  max_completion_length: 256\n  multi_objective_aggregation: normalize_then_sum\n",
			[]string{`preference = grpo(completion = 256, trl = "1.8")`}, nil},
		{"full fine-tune, beta 0", base + "rl: grpo\ntrl:\n  max_completion_length: 256\n",
			[]string{`preference = grpo(completion = 256, trl = "1.8")`}, []string{"lora ="}},
	} {
		checkImportedScript(t, tc.name, tc.config, seq, tc.want, tc.not)
	}
	res, err := Import("r.yml", []byte(lora+"trl:\n  max_completion_length: 1024\n  num_generations: 8\n  top_p: 0.9\n  loss_type: dr_grpo\n  epsilon_high: 0.28\n  vllm_lora_sync: true\n"+
		"vllm:\n  dtype: auto\n  enable_prefix_caching: true\n"), defaults(seq))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown) > 0 {
		t.Errorf("not understood: %v", res.Unknown)
	}
}

func TestAxolotlGRPOErrors(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 4\ngradient_accumulation_steps: 2\nattn_implementation: flash_attention_2\n"
	const lora = base + "adapter: lora\nlora_r: 16\nlora_alpha: 32\nlora_target_linear: true\nrl: grpo\n"
	o := Options{Model: "config.json", Seq: 1536}
	runErrorCases(t, []errorCase{
		{name: "no completion length", file: "r.yml", config: lora, opts: o,
			want: "r.yml: key trl.max_completion_length: missing: Axolotl hands GRPOConfig max_completion_length null, a generation without a bound", wantHint: "max_completion_length: 512"},
		{name: "no seq", file: "r.yml", config: lora + "trl:\n  max_completion_length: 512\n", opts: Options{Model: "config.json"},
			want: "r.yml:11: key trl.max_completion_length: GRPO's rows are each prompt and its completion, which sequence_len does not bound (Axolotl passes it to no GRPOConfig key): say --seq", wantHint: "--seq N"},
		{name: "a full fine-tune's reference copy", file: "r.yml", config: base + "rl: grpo\ntrl:\n  max_completion_length: 512\n  beta: 0.04\n", opts: o,
			want: "r.yml:5: key rl: not modelled: rl grpo with beta > 0 without an adapter (GRPOTrainer loads its reference copy in fp32, create_model_from_path's default, beside the policy)", wantHint: "adapter: lora"},
		{name: "Liger's loss", file: "r.yml", config: lora + "trl:\n  max_completion_length: 512\n  use_liger_loss: true\n", opts: o,
			want: "r.yml:12: key trl.use_liger_loss: not modelled with rl grpo: Liger's fused GRPO loss", wantHint: "docs/grpo.md"},
		{name: "the async trainer", file: "r.yml", config: lora + "trl:\n  max_completion_length: 512\n  use_data_producer: true\n", opts: o,
			want: "r.yml:12: key trl.use_data_producer: not modelled with rl grpo: Axolotl's asynchronous GRPO trainer", wantHint: "docs/grpo.md"},
		{name: "a reward model", file: "r.yml", config: lora + "trl:\n  max_completion_length: 512\n  reward_funcs: [rewards.fmt, Skywork/Skywork-Reward-V2-Llama-3.1-8B]\n", opts: o,
			want: "r.yml:12: key trl.reward_funcs: not modelled with rl grpo: a reward model (Skywork/Skywork-Reward-V2-Llama-3.1-8B), whose weights GRPOTrainer keeps on each GPU through the step", wantHint: "docs/grpo.md"},
		{name: "packed rows", file: "r.yml", config: lora + "sample_packing: true\ntrl:\n  max_completion_length: 512\n", opts: o,
			want: "r.yml:10: key sample_packing: not modelled with rl grpo: packed rows (GRPOTrainer pads each prompt and completion)", wantHint: "docs/grpo.md"},
		{name: "unknown vllm mode", file: "r.yml", config: lora + "trl:\n  max_completion_length: 512\n  use_vllm: true\n  vllm_mode: remote\n", opts: o,
			want: "r.yml:13: key trl.vllm_mode: unknown vLLM mode remote", wantHint: `"colocate" or "server"`},
	})
}
