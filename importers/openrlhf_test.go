package importers

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openrlhfStep is OpenRLHF's global batch: --train.batch_size samples a
// step (DeepSpeed's train_batch_size, get_ds_train_config), each at most
// --data.max_len tokens, packed or not.
func openrlhfStep(batch, maxLen int64) step {
	return deepspeedStep(batch, maxLen)
}

// openrlhfModelOpts is --model config.json read from sim's testdata.
func openrlhfModelOpts(t *testing.T, gpus int64, name string) Options {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", name))
	if err != nil {
		t.Fatal(err)
	}
	return Options{GPUs: gpus, Model: "config.json", ModelData: data}
}

// TestOpenRLHF imports OpenRLHF's examples/scripts at v0.11.0
// (testdata/README.md) and checks each plan against one written by hand
// from OpenRLHF's code (openrlhf.go): the model's config.json as
// hf_config with flash-attn's cross-entropy over the fp32 logits the loop
// holds; DeepSpeed's ZeRO stage, bf16 and AdamW from get_train_ds_config;
// the accumulation train.batch_size / (micro x GPUs); packed rows of micro
// x max_len tokens; LoRA's rank and alpha with dropout 0 on all-linear
// and enable_input_require_grads; non-reentrant checkpointing.
func TestOpenRLHF(t *testing.T) {
	const model = `hf_config("config.json", attn = "flash", transformers = "5.15.0", loss = "flash_cross_entropy", forward_upcast = True)`
	llama := map[string]string{"config.json": "../../sim/testdata/hf/llama-3-8b.json"}
	mixtral := map[string]string{"config.json": "../../sim/testdata/hf/mixtral-8x7b-v0.1.json"}
	const contiguous = "deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)"
	runImportCases(t, []importCase{{
		name: "full SFT of Llama 3 8B, ZeRO-2, packed (train_sft.sh)",
		file: "openrlhf/train_sft.sh",
		opts: openrlhfModelOpts(t, 8, "llama-3-8b.json"),
		step: openrlhfStep(256, 2048),
		notModelled: []string{
			"ds.packing_samples: a micro-batch's 2 samples in one row of their own tokens, at most 4096: memsh replays 4096, attention causal over the whole row (flash's varlen kernel attends within each sample: less time)",
			contiguous,
		},
		files: llama,
		hand: `plan = train(` + model + `, keep_logits = "next", batch = 1, seq = 4096, grad_accum = 16,
             checkpoint = "full", precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 2), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name: "LoRA on Mixtral 8x7B, ZeRO-3, packed (train_sft_mixtral_lora.sh)",
		file: "openrlhf/train_sft_mixtral_lora.sh",
		opts: openrlhfModelOpts(t, 8, "mixtral-8x7b-v0.1.json"),
		step: openrlhfStep(128, 2048),
		notModelled: []string{
			"model.aux_loss_coef: a MoE model's load-balancing loss over the router logits it returns (Actor sets output_router_logits for every model that has it)",
			"ds.packing_samples: a micro-batch's 4 samples in one row of their own tokens, at most 8192: memsh replays 8192, attention causal over the whole row (flash's varlen kernel attends within each sample: less time)",
			"deepspeed.zero_optimization.reduce_scatter: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			contiguous,
		},
		files: mixtral,
		hand: `plan = train(` + model + `, keep_logits = "next", lora = lora(rank = 64, alpha = 64, targets = ["all-linear"], dropout = 0.0),
             batch = 1, seq = 8192, grad_accum = 4, checkpoint = checkpoint("full", input_requires_grad = True),
             precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 3), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// train_dpo: a pair is two rows (concatenated_forward), the
		// reference a second model partitioned as the policy at stage 3;
		// the packed rows replayed as the pair's rows of max_len
		name: "full DPO of Llama 3 8B, ZeRO-3, packed (train_dpo_llama.sh)",
		file: "openrlhf/train_dpo_llama.sh",
		opts: openrlhfModelOpts(t, 8, "llama-3-8b.json"),
		step: openrlhfStep(2*256, 8192),
		notModelled: []string{
			"ds.packing_samples: a micro-batch's 2 chosen and rejected rows in one row of their own tokens, at most 16384: memsh replays 2 rows of 8192 (the same tensors when every row is full), attention causal over each",
			"deepspeed.zero_optimization.reduce_scatter: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			contiguous,
		},
		files: llama,
		hand: `plan = train(hf_config("config.json", attn = "flash", transformers = "5.15.0"), preference = dpo(trainer = "openrlhf"),
             batch = 1, seq = 8192, grad_accum = 32, checkpoint = "full",
             precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 3), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}})
}

// TestOpenRLHFScript holds the generated Starlark (--emit-star's script)
// of train_sft.sh changed one argument at a time: each change's train()
// or hf_config() keyword, and the notes it adds.
func TestOpenRLHFScript(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "openrlhf", "train_sft.sh"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	edit := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("train_sft.sh has no %q", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	for _, tc := range []struct {
		name, script string
		gpus         int64
		want, not    []string // in the script, and not in it
		note         string   // a not-modelled note's start
	}{
		{name: "as it is", script: base, gpus: 8, want: []string{"batch = 1,", "seq = 4096,", "grad_accum = 16,", `checkpoint = "full"`, "parallel = parallel(dp = 8, zero = 2)"}},
		{name: "unpacked", script: edit("--ds.packing_samples \\\n", ""), gpus: 8, want: []string{"batch = 2,", "seq = 2048,", "grad_accum = 16,"},
			note: "data.max_len: unpacked rows are padded to the batch's longest, at most 2048 tokens"},
		{name: "ZeRO-3 with the optimizer on the CPU", script: edit("--ds.zero_stage 2", "--ds.zero_stage 3 --ds.adam_offload"), gpus: 8,
			want: []string{"parallel = parallel(dp = 8, zero = 3)", `offload = offload(optimizer = "cpu")`}},
		{name: "overlap_comm at stage 2", script: edit("--ds.zero_stage 2", "--ds.zero_stage 2 --ds.overlap_comm"), gpus: 8,
			want: []string{"parallel = parallel(dp = 8, zero = 2, overlap_comm = True)"}},
		{name: "fp16", script: edit("--ds.param_dtype bf16", "--ds.param_dtype fp16"), gpus: 8, want: []string{`precision = "fp16-mixed"`}},
		{name: "reentrant checkpointing", script: edit("--model.gradient_checkpointing_enable", "--model.gradient_checkpointing_enable --model.gradient_checkpointing_reentrant"), gpus: 8,
			want: []string{`checkpoint = checkpoint("full", reentrant = True)`}},
		{name: "no checkpointing", script: edit(" \\\n   --model.gradient_checkpointing_enable", ""), gpus: 8, not: []string{"checkpoint ="}},
		{name: "sdpa unpacked", script: strings.Replace(edit("--ds.packing_samples \\\n", ""), "flash_attention_2", "sdpa", 1), gpus: 8, want: []string{`attn = "sdpa"`}},
		{name: "packing turns sdpa to flash", script: edit("flash_attention_2", "sdpa"), gpus: 8, want: []string{`attn = "flash"`}},
		{name: "LoRA on q and v", script: edit("--ds.zero_stage 2", "--ds.zero_stage 2 --ds.lora.rank 8 --ds.lora.target_modules q_proj v_proj"), gpus: 8,
			want: []string{`lora = lora(rank = 8, alpha = 16, targets = ["q", "v"], dropout = 0.0)`, `checkpoint = checkpoint("full", input_requires_grad = True)`}},
		{name: "deepspeed --num_gpus 4", script: edit("deepspeed --module", "deepspeed --num_gpus 4 --module"), gpus: 1,
			want: []string{"grad_accum = 32,", "parallel = parallel(dp = 4, zero = 2)"}},
		{name: "torchrun", script: edit("deepspeed --module", "torchrun --nproc_per_node 8 --nnodes 2 -m"), gpus: 1,
			want: []string{"grad_accum = 8,", "parallel = parallel(dp = 16, zero = 2)", `cluster = cluster(nodes = 2`}},
		{name: "grad_accum_dtype fp32", script: edit("--ds.zero_stage 2", "--ds.zero_stage 2 --ds.grad_accum_dtype fp32"), gpus: 8,
			want: []string{`precision = precision(params = "bf16", grads = "fp32", master = "fp32")`, `"precision": "ds.grad_accum_dtype"`}},
		{name: "ZeRO++ hpZ", script: edit("--ds.zero_stage 2", "--ds.zero_stage 3 --ds.zpg 8"), gpus: 16,
			note: "deepspeed.zero_optimization.zero_hpz_partition_size: 8: ZeRO++'s secondary copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := openrlhfModelOpts(t, tc.gpus, "llama-3-8b.json")
			o.Top = 5 // the script hands advise() the arguments behind its keywords
			res, err := Import("train_sft.sh", []byte(tc.script), defaults(o))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Unknown) > 0 {
				t.Errorf("not understood: %q", res.Unknown)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Script, w) {
					t.Errorf("the script has no %q:\n%s", w, res.Script)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(res.Script, w) {
					t.Errorf("the script has %q:\n%s", w, res.Script)
				}
			}
			if tc.note != "" && !slices.ContainsFunc(res.NotModelled, func(n string) bool { return strings.HasPrefix(n, tc.note) }) {
				t.Errorf("not modelled %q, want a note %q...", res.NotModelled, tc.note)
			}
		})
	}
}

// TestOpenRLHFErrors: what memsh does not replay is refused at its
// argument, with the script's line and a hint.
func TestOpenRLHFErrors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "openrlhf", "train_sft.sh"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	edit := func(old, new string) string { return strings.Replace(base, old, new, 1) }
	read := func(name string) string {
		d, err := os.ReadFile(filepath.Join("testdata", "openrlhf", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(d)
	}
	llama := openrlhfModelOpts(t, 8, "llama-3-8b.json")
	for _, tc := range []struct {
		name, script string
		opts         Options
		want, hint   string
	}{
		{"DPO against another reference", strings.Replace(read("train_dpo_llama.sh"), "--model.beta 0.1", "--model.beta 0.1 --ref.model_name_or_path OpenRLHF/Llama-3-8b-sft-other", 1), llama,
			"key ref.model_name_or_path: a reference other than the model (OpenRLHF/Llama-3-8b-sft-other) is not modelled", "leave it out"},
		{"DPO with the reference offloaded", strings.Replace(read("train_dpo_llama.sh"), "--model.beta 0.1", "--model.beta 0.1 --ref.offload", 1), llama,
			"key ref.offload: the reference's weights offloaded to the CPU", "leave it out"},
		{"reward model", read("train_rm.sh"), llama, "r.sh:31: key launcher.command: train_rm is not modelled: OpenRLHF's reward model", "train_sft"},
		{"PPO over Ray", read("train_ppo_ray_hybrid_engine.sh"), llama, "r.sh:3: key launcher.command: train_ppo_ray (PPO, GRPO and REINFORCE++ over Ray actors with vLLM rollouts) is not modelled", "grpo(...)"},
		{"no config.json", base, Options{GPUs: 8}, "r.sh:30: key model.model_name_or_path: no config.json found for meta-llama/Meta-Llama-3-8B", "--model config.json"},
		{"OpenRLHF 0.10.1's names beside the dotted", edit("--model.model_name_or_path", "--pretrain"), llama, "r.sh:30: key pretrain: is OpenRLHF's flat argument (before v0.10.2), beside its dotted --adam.lr", "--model.model_name_or_path (v0.10.2 and later)"},
		{"a batch that does not divide", edit("--train.batch_size 256", "--train.batch_size 100"), llama, "r.sh:30: key train.batch_size: 100 does not divide into micro batches of 2 on 8 GPUs", "DeepSpeed asserts"},
		{"QLoRA", edit("--ds.packing_samples", "--ds.packing_samples --ds.load_in_4bit --ds.lora.rank 8"), llama, "key ds.load_in_4bit: OpenRLHF's QLoRA casts the norms to fp32", "nf4-dq"},
		{"ring attention", edit("--ds.packing_samples", "--ds.packing_samples --ds.ring_attn_size 2"), llama, "key ds.ring_attn_size: ring attention over 2 GPUs (ring_flash_attn) is not modelled", "parallel(cp = ...)"},
		{"AutoTP", edit("--ds.packing_samples", "--ds.packing_samples --ds.tensor_parallel_size 2"), llama, "key ds.tensor_parallel_size: DeepSpeed's AutoTP over 2 GPUs is not modelled", "parallel(tp = ...)"},
		{"Muon", edit("--ds.packing_samples", "--ds.packing_samples --optim muon"), llama, "key optim: optimizer muon (DeepSpeed's Muon) is not modelled", "adam"},
		{"fp32 weights", edit("--ds.param_dtype bf16", "--ds.param_dtype fp32"), llama, "key ds.param_dtype: unknown dtype fp32", "bf16 or fp16"},
		{"flash-attn 3", strings.Replace(edit("--ds.packing_samples \\\n", ""), "flash_attention_2", "flash_attention_3", 1), llama, "key ds.attn_implementation: unknown attention flash_attention_3", "flash_attention_2, sdpa or eager"},
		{"--num_gpus against --gpus", edit("deepspeed --module", "deepspeed --num_gpus 4 --module"), llama, "key launcher.num_gpus: 4 processes a node, where --gpus says 8", "--gpus"},
		{"deepspeed's host list", edit("deepspeed --module", "deepspeed --include localhost:0,1 --module"), llama, "key launcher.include: DeepSpeed's host and GPU lists are not read", "--num_gpus"},
		{"another launcher", edit("deepspeed --module", "accelerate launch -m"), llama, "OpenRLHF's entry point run by accelerate", "deepspeed --module"},
		{"no launch", "echo hello\n", llama, "the script never launches", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults(tc.opts)
			o.Trainer = "openrlhf"
			_, err := Import("r.sh", []byte(tc.script), o)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if !strings.Contains(e.Error(), tc.want) {
				t.Errorf("got %q, want %q", e.Error(), tc.want)
			}
			if !strings.Contains(e.Hint, tc.hint) {
				t.Errorf("hint %q, want %q", e.Hint, tc.hint)
			}
		})
	}
}

// openrlhfSFTArgs is every argument of openrlhf/cli/train_sft.py at
// v0.11.0 (its argparse, in order) with a value that trains as the
// example does: each must be read, of no effect, or listed not modelled,
// never left not understood.
var openrlhfSFTArgs = []string{
	"--ckpt.output_dir ./ckpt", "--ckpt.save_steps -1", "--ckpt.save_hf", "--ckpt.disable_ds", "--logger.logging_steps 1", "--eval.steps -1",
	"--ckpt.path ./ckpt/checkpoints_sft", "--ckpt.max_num 3", "--ckpt.max_mem 100000000", "--ckpt.load_enable", "--ds.use_universal_ckpt",
	"--train.micro_batch_size 2", "--train.batch_size 256", "--model.gradient_checkpointing_enable", "--train.seed 42",
	"--train.full_determinism_enable", "--local_rank -1", "--ds.zero_stage 2", "--ds.param_dtype bf16", "--ds.zpg 1", "--ds.adam_offload",
	"--ds.attn_implementation flash_attention_2", "--ds.experts_implementation grouped_mm", "--ds.grad_accum_dtype fp32", "--ds.overlap_comm",
	"--model.gradient_checkpointing_reentrant", "--data.disable_fast_tokenizer", "--data.dataloader_num_workers 0", "--ds.tensor_parallel_size 1",
	"--train.max_epochs 2", "--model.aux_loss_coef 0", "--model.model_name_or_path meta-llama/Meta-Llama-3-8B", "--model.pretrain_mode_enable",
	"--optim adam", "--muon.lr 0.02", "--muon.momentum 0.95", "--muon.ns_steps 5", "--muon.nesterov", "--muon.no_nesterov",
	"--adam.lr 5e-6", "--adam.betas 0.9 0.95", "--adam.eps 1e-8", "--adam.weight_decay 0.0", "--lr_scheduler cosine_with_min_lr",
	"--lr_warmup_ratio 0.03", "--min_lr_ratio 0.1", "--max_norm 1.0", "--ds.ring_attn_size 1", "--ds.ring_attn_head_stride 1",
	"--ds.lora.rank 8", "--ds.lora.alpha 16", "--ds.lora.target_modules all-linear", "--ds.lora.dropout 0", "--ds.packing_samples",
	"--data.dataset Open-Orca/OpenOrca", "--data.dataset_probs 1.0", "--eval.dataset x", "--data.dataset_split train", "--eval.split train",
	"--data.max_samples 1000", "--data.multiturn", "--data.input_key question", "--data.output_key response", "--data.input_template x{}",
	"--data.apply_chat_template", "--data.tokenizer_chat_template x", "--data.max_len 2048", "--logger.wandb.key k", "--logger.wandb.org o",
	"--logger.wandb.group g", "--logger.wandb.project p", "--logger.wandb.run_name r", "--logger.tensorboard_dir d", "--use_ms",
}

// openrlhfDPOArgs are train_dpo.py's arguments at v0.11.0 that
// train_sft.py has not (train_sft.py's own: model.pretrain_mode_enable,
// data.multiturn, data.input_key and data.output_key, left out).
var openrlhfDPOArgs = []string{
	"--ref.offload false", "--model.beta 0.1", "--model.ipo_enable", "--model.label_smoothing 0.1", "--model.nll_loss_coef 0",
	"--ref.model_name_or_path meta-llama/Meta-Llama-3-8B", "--data.prompt_key prompt", "--data.chosen_key chosen", "--data.rejected_key rejected",
}

// TestOpenRLHFEveryArgument gives train_sft.py and train_dpo.py every
// argument at once.
func TestOpenRLHFEveryArgument(t *testing.T) {
	sftOnly := []string{"--model.pretrain_mode_enable", "--data.multiturn", "--data.input_key question", "--data.output_key response"}
	dpoArgs := append(slices.DeleteFunc(slices.Clone(openrlhfSFTArgs), func(a string) bool { return slices.Contains(sftOnly, a) }), openrlhfDPOArgs...)
	for _, tc := range []struct {
		entry string
		args  []string
		want  string
	}{
		{"train_sft", openrlhfSFTArgs, `keep_logits = "next"`},
		{"train_dpo", dpoArgs, `preference = dpo(trainer = "openrlhf")`},
	} {
		script := "deepspeed --module openrlhf.cli." + tc.entry + " " + strings.Join(tc.args, " ") + "\n"
		res, err := Import("r.sh", []byte(script), defaults(openrlhfModelOpts(t, 8, "llama-3-8b.json")))
		if err != nil {
			t.Fatalf("%s: %v", tc.entry, err)
		}
		if len(res.Unknown) > 0 {
			t.Errorf("%s: not understood: %q", tc.entry, res.Unknown)
		}
		for _, w := range []string{"lora = lora(rank = 8, alpha = 16", `offload = offload(optimizer = "cpu")`, tc.want} {
			if !strings.Contains(res.Script, w) {
				t.Errorf("%s: the plan has no %q:\n%s", tc.entry, w, res.Script)
			}
		}
	}
}
