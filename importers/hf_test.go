package importers

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHF imports alignment-handbook's Zephyr SFT recipes (TRL's SFTConfig
// with its ModelConfig; testdata/README.md names their commits) and checks
// each plan against the one written by hand: Mistral 7B with flash
// attention, weights loaded in bf16 (torch_dtype), per-device batch and
// accumulation, max_seq_length / max_length, gradient checkpointing, the
// Trainer's default optimizer (adamw_torch_fused), and for QLoRA the 4-bit
// base under PEFT's adapters with the norms peft keeps in fp32.
// hfFSDPVersionUnset is the note for a run under FSDP that says neither its
// FSDP version nor its transformers release.
const hfFSDPVersionUnset = "fsdp_config.version: unset, so transformers 5.10 and later run FSDP2 (4.x and 5.0-5.9 FSDP1: " +
	"memsh.transformers=4.57.1 says a 4.x run, or set fsdp_config.version)"

func TestHF(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "zephyr-7b-beta SFT, full",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 1, 2048),
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "zephyr-7b-beta SFT, QLoRA on a 24 GB card",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 1, 2048),
		opts: Options{GPU: "RTX-4090"},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2,
             precision = precision(params = "bf16", autocast = True, norms = "fp32"), optimizer = adamw(fused = True), checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05), quant = "nf4",
             clip_grad_norm = 1.0, gpu = "RTX-4090")`,
	}, {
		name: "zephyr-7b-beta SFT, full, asking for reentrant checkpointing",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 1, 2048),
		opts: Options{Overrides: []string{"gradient_checkpointing_kwargs.use_reentrant=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "zephyr-7b-beta SFT, LoRA under DeepSpeed ZeRO-3: TRL forces reentrant checkpointing",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 1, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "gradient_accumulation_steps=1", "deepspeed=autotuning_z3.json"}, ReadFile: func(name string) ([]byte, error) {
			return os.ReadFile(filepath.Join("testdata", "deepspeed", name))
		}},
		notModelled: []string{
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 3))`,
	}, {
		name: "zephyr-7b-beta SFT, LoRA under FSDP1 on 8 GPUs: peft's wrap policy puts every adapter in a unit of its own",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.version=1"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_adapter_units = True, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name: "the same with accelerator_config's sync_each_batch: FSDP1 reduce-scatters every micro-batch",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.fsdp_version=1", "accelerator_config.gradient_accumulation_kwargs.sync_each_batch=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_adapter_units = True, fsdp_sync_module_states = True, fsdp_sync_each_batch = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name: "fsdp_config.sync_module_states=false: no broadcast while FSDP1 wraps the model",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.version=1", "fsdp_config.sync_module_states=false"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_adapter_units = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name: "cpu_ram_efficient_loading forces sync_module_states on (accelerate), the fsdp_ prefix dropped as the Trainer does",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.version=1", "fsdp_config.fsdp_sync_module_states=false", "fsdp_config.cpu_ram_efficient_loading=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_adapter_units = True, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name: "fsdp_config's backward_prefetch, the fsdp_ prefix dropped: BACKWARD_POST reaches FullyShardedDataParallel",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.version=1", "fsdp_config.fsdp_backward_prefetch=BACKWARD_POST"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_adapter_units = True, fsdp_sync_module_states = True, fsdp_backward_prefetch = "post"))`,
	}, {
		name: "LoRA under FSDP2: accelerate 1.11+ accumulates without gradient sync",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.fsdp_version=2"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2, fsdp_no_sync = True))`,
	}, {
		name: "the same with CPU offload: not modelled, said",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap offload", "fsdp_config.fsdp_version=2"}},
		notModelled: []string{"fsdp_config.fsdp_version: accelerate 1.11.0 and later accumulate FSDP2 gradients unsharded (set_requires_gradient_sync(False)); " +
			"with offload memsh reduce-scatters every micro-batch instead (fsdp_no_sync is not modelled with CPU offload)"},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2), offload = offload(params = "cpu"))`,
	}, {
		name: "FSDP2 with sync_each_batch: every micro-batch reduce-scatters, memsh's FSDP2 default",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "fsdp=full_shard auto_wrap", "fsdp_config.fsdp_version=2", "accelerator_config.gradient_accumulation_kwargs.sync_each_batch=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}, {
		name: "LoRA under DDP with sync_each_batch: the all-reduce of every micro-batch is said",
		file: "hf/zephyr_sft_qlora.yaml",
		step: hfStep(4, 2, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"load_in_4bit=false", "accelerator_config.gradient_accumulation_kwargs.sync_each_batch=true"}},
		notModelled: []string{"accelerator_config.gradient_accumulation_kwargs.sync_each_batch: DDP's all-reduce of every micro-batch " +
			"(memsh all-reduces once a step, as under accelerate's no_sync(): the communication time is under-counted)"},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 4, seq = 2048, grad_accum = 2, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", input_requires_grad = True),
             lora = lora(rank = 16, alpha = 16, targets = ["q", "k", "v", "o", "gate", "up", "down"], dropout = 0.05),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8))`,
	}, {
		name: "the plain Trainer's gradient checkpointing: non-reentrant (transformers 5)",
		file: "hf/trainer_gc.json",
		step: hfStep(2, 1, 1, 1024),
		opts: Options{Seq: 1024},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "sdpa"), batch = 2, seq = 1024, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "the plain Trainer under transformers 4.x: the run says use_reentrant=true (4.x's default)",
		file: "hf/trainer_gc.json",
		step: hfStep(2, 1, 1, 1024),
		opts: Options{Seq: 1024, Overrides: []string{"gradient_checkpointing_kwargs.use_reentrant=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "sdpa"), batch = 2, seq = 1024, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "the plain Trainer under transformers 4.x, said by memsh.transformers: reentrant checkpointing, float32 weights",
		file: "hf/trainer_gc.json",
		step: hfStep(2, 1, 1, 1024),
		opts: Options{Seq: 1024, Overrides: []string{"memsh.transformers=4.57.1"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "sdpa"), batch = 2, seq = 1024, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "FSDP2 over fp32 weights: accelerate reduce-scatters in the Trainer's bf16 (its policy's reduce_dtype), not in fp32",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"torch_dtype=float32", "fsdp=full_shard auto_wrap", "fsdp_config.fsdp_version=2"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2, reduce_dtype = "bf16"))`,
	}, {
		name: "TRL's SFTTrainer under transformers 4.x: non-reentrant, as it asks itself",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 1, 2048),
		opts: Options{Overrides: []string{"memsh.transformers=4.57.1"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "transformers 5.23's names: activation_checkpointing wins over its deprecated alias, its kwargs too",
		file: "hf/trainer_gc.json",
		step: hfStep(2, 1, 1, 1024),
		opts: Options{Seq: 1024, Overrides: []string{"gradient_checkpointing=false", "activation_checkpointing=true",
			"gradient_checkpointing_kwargs.use_reentrant=false", "activation_checkpointing_kwargs.use_reentrant=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "sdpa"), batch = 2, seq = 1024, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "every_n_layers and offload in the kwargs",
		file: "hf/trainer_gc.json",
		step: hfStep(2, 1, 1, 1024),
		opts: Options{Seq: 1024, Overrides: []string{"gradient_checkpointing_kwargs.every_n_layers=2", "gradient_checkpointing_kwargs.offload=true"}},
		notModelled: []string{"gradient_checkpointing_kwargs.every_n_layers: transformers checkpoints layers 0, 2, 4, ...; checkpoint(every=2) " +
			"the same number of layers, from layer 1 (the count is the same, which layers may differ by one at the ends)",
			"gradient_checkpointing_kwargs.offload: the checkpointed layers' inputs held in pinned host memory (save_on_cpu): memsh keeps them on the device"},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "sdpa"), batch = 2, seq = 1024, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = checkpoint(every = 2), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name:  "the plain Trainer with the model's config.json under transformers 5: the checkpoint's dtype (torch_dtype bfloat16)",
		file:  "hf/trainer_gc.json",
		step:  hfStep(2, 1, 1, 1024),
		opts:  Options{Seq: 1024, Model: "mistral.json"},
		files: map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		hand: `plan = train(hf_config("mistral.json", attn = "sdpa"), batch = 2, seq = 1024, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name:  "the plain Trainer with the model's config.json under transformers 4.x: float32 weights, reentrant checkpointing",
		file:  "hf/trainer_gc.json",
		step:  hfStep(2, 1, 1, 1024),
		opts:  Options{Seq: 1024, Model: "mistral.json", Overrides: []string{"memsh.transformers=4.57.1"}},
		files: map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		hand: `plan = train(hf_config("mistral.json", attn = "sdpa", transformers = "4.57.1"), batch = 2, seq = 1024, precision = "bf16-mixed",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name:        "zephyr-7b-beta SFT, full, with use_liger_kernel",
		file:        "hf/zephyr_sft_full.yaml",
		step:        hfStep(16, 1, 1, 2048),
		opts:        Options{Overrides: []string{"use_liger_kernel=true"}},
		notModelled: []string{"use_liger_kernel: Liger's RoPE kernel (in place on copies of q and k: transients only)"},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             loss_chunks = "liger", liger_kernels = True, clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name:        "zephyr-7b-beta SFT, full, FSDP over 8 GPUs, the model from its config.json, 8-bit paged AdamW: FSDP2, transformers 5.10+'s default",
		notModelled: []string{hfFSDPVersionUnset},
		file:        "hf/zephyr_sft_full.yaml",
		step:        hfStep(2, 1, 8, 4096),
		opts:        Options{GPUs: 8, Seq: 4096, Model: "mistral.json", Overrides: []string{"fsdp=full_shard auto_wrap", "optim=paged_adamw_8bit", "per_device_train_batch_size=2"}},
		files:       map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		hand: `plan = train(hf_config("mistral.json", attn = "flash"), batch = 2, seq = 4096, precision = "bf16", optimizer = paged_adamw8bit(),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}, {
		name:  "the same under transformers 5.9: FSDP1, its default before 5.10",
		file:  "hf/zephyr_sft_full.yaml",
		step:  hfStep(2, 1, 8, 4096),
		opts:  Options{GPUs: 8, Seq: 4096, Model: "mistral.json", Overrides: []string{"fsdp=full_shard auto_wrap", "optim=paged_adamw_8bit", "per_device_train_batch_size=2", "memsh.transformers=5.9.0"}},
		files: map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		hand: `plan = train(hf_config("mistral.json", attn = "flash", transformers = "5.9.0"), batch = 2, seq = 4096, precision = "bf16", optimizer = paged_adamw8bit(),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name:  "fsdp: true (transformers 5) with shard_grad_op as FSDP1's reshard_after_forward: accelerate runs FSDP_SHARDING_STRATEGY's FULL_SHARD, said",
		file:  "hf/zephyr_sft_full.yaml",
		step:  hfStep(2, 1, 8, 4096),
		opts:  Options{GPUs: 8, Seq: 4096, Model: "mistral.json", Overrides: []string{"fsdp=true", "fsdp_config.version=1", "fsdp_config.reshard_after_forward=shard_grad_op", "optim=paged_adamw_8bit", "per_device_train_batch_size=2"}},
		files: map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		notModelled: []string{"fsdp_config.reshard_after_forward: shard_grad_op under FSDP1 changes nothing with transformers 5: accelerate 1.16 runs FSDP_SHARDING_STRATEGY's " +
			"FULL_SHARD (accelerator.py l.1919), which memsh replays; an accelerate config's fsdp_sharding_strategy SHARD_GRAD_OP (accelerate_config=) keeps the parameters gathered"},
		hand: `plan = train(hf_config("mistral.json", attn = "flash"), batch = 2, seq = 4096, precision = "bf16", optimizer = paged_adamw8bit(),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name:  "the legacy fsdp option shard_grad_op under transformers 4.57 (FSDP1): the Trainer exports FSDP_SHARDING_STRATEGY, the parameters stay gathered",
		file:  "hf/zephyr_sft_full.yaml",
		step:  hfStep(2, 1, 8, 4096),
		opts:  Options{GPUs: 8, Seq: 4096, Model: "mistral.json", Overrides: []string{"fsdp=shard_grad_op auto_wrap", "memsh.transformers=4.57.1", "torch_dtype=bfloat16", "optim=paged_adamw_8bit", "per_device_train_batch_size=2"}},
		files: map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		hand: `plan = train(hf_config("mistral.json", attn = "flash", transformers = "4.57.1"), batch = 2, seq = 4096, precision = "bf16", optimizer = paged_adamw8bit(),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, reshard_after_forward = False, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name:        "the legacy fsdp option shard_grad_op under FSDP2: reshard_after_forward false",
		notModelled: []string{hfFSDPVersionUnset},
		file:        "hf/zephyr_sft_full.yaml",
		step:        hfStep(2, 1, 8, 4096),
		opts:        Options{GPUs: 8, Seq: 4096, Model: "mistral.json", Overrides: []string{"fsdp=shard_grad_op auto_wrap", "optim=paged_adamw_8bit", "per_device_train_batch_size=2"}},
		files:       map[string]string{"mistral.json": "../../sim/testdata/hf/mistral-7b-v0.1.json"},
		hand: `plan = train(hf_config("mistral.json", attn = "flash"), batch = 2, seq = 4096, precision = "bf16", optimizer = paged_adamw8bit(),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2, reshard_after_forward = False))`,
	}, {
		name: "zephyr-7b-beta SFT, full, handed to DeepSpeed ZeRO-3 on 8 GPUs (the autotuning config's auto filled; no bf16 section: accelerate's set_mixed_precision adds the Trainer's bf16)",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"deepspeed=autotuning_z3.json"}, ReadFile: func(name string) ([]byte, error) {
			return os.ReadFile(filepath.Join("testdata", "deepspeed", name))
		}},
		notModelled: []string{
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 3))`,
	}})
}

func TestHFErrors(t *testing.T) {
	const args = `{"per_device_train_batch_size": 4, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1"`
	runErrorCases(t, []errorCase{
		{name: "TrainingArguments say nothing of the sequence", file: "args.json", config: args + `}`,
			want: "args.json: key max_length: missing: TrainingArguments say nothing of the sequence", wantHint: "--seq N"},
		{name: "a model the zoo does not have", file: "args.json", config: `{"per_device_train_batch_size": 4, "model_name_or_path": "org/unknown"}`, opts: Options{Seq: 512},
			want: "args.json:1: key model_name_or_path: memsh's zoo has no model for org/unknown", wantHint: "--model"},
		{name: "no model: TrainingArguments' dump holds none", file: "args.json", config: `{"per_device_train_batch_size": 4, "gradient_checkpointing": true}`, opts: Options{Seq: 512},
			want: "args.json: key model_name_or_path: the config names no model", wantHint: "--model config.json"},
		{name: "SFTConfig without gradient_checkpointing", file: "sft.yaml", config: "model_name_or_path: mistralai/Mistral-7B-v0.1\nper_device_train_batch_size: 2\nmax_length: 1024\n",
			want: "sft.yaml: key gradient_checkpointing: missing: TRL's SFTConfig and TrainingArguments default it differently", wantHint: "gradient_checkpointing=true"},
		{name: "a DeepSpeed config that cannot be read", file: "args.json", config: args + `, "deepspeed": "ds_config.json"}`, opts: Options{Seq: 512},
			want: "args.json:1: key deepspeed: no file can be read here", wantHint: "memsh check ds_config.json"},
		{name: "a DeepSpeed config at odds with the Trainer's batch", file: "args.json", opts: Options{Seq: 512, GPUs: 8},
			config: args + `, "deepspeed": {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}}`,
			want:   "args.json: key deepspeed: its micro batch 2 x accumulation 1 is not per_device_train_batch_size 4 x gradient_accumulation_steps 1", wantHint: "auto"},
		{name: "a DeepSpeed precision at odds with the Trainer's", file: "args.json", opts: Options{Seq: 512, GPUs: 8},
			config: args + `, "deepspeed": {"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": true}}}`,
			want:   "args.json: key deepspeed: its fp16.enabled is true, the Trainer's fp16 false", wantHint: "mismatch"},
		{name: "FSDP and DeepSpeed", file: "args.json", opts: Options{Seq: 512, GPUs: 8},
			config: args + `, "fsdp": "full_shard", "deepspeed": {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}}`,
			want:   "args.json:1: key fsdp: and deepspeed are both set", wantHint: "drop fsdp or deepspeed"},
		{name: "bf16 and fp16", file: "args.json", config: args + `, "fp16": true}`, opts: Options{Seq: 512},
			want: "args.json:1: key bf16: and fp16 are both true", wantHint: "keep one"},
		{name: "an optimizer memsh does not model", file: "args.json", config: args + `, "optim": "galore_adamw"}`, opts: Options{Seq: 512},
			want: "args.json:1: key optim: optimizer galore_adamw is not modelled", wantHint: "adamw_8bit"},
		{name: "an FSDP sharding memsh does not replay", file: "args.json", config: args + `, "fsdp": "hybrid_shard"}`, opts: Options{Seq: 512, GPUs: 8},
			want: "args.json:1: key fsdp: hybrid_shard is not modelled", wantHint: "full_shard"},
		{name: "FSDP1's strategy as a bool", file: "args.json", config: args + `, "fsdp": true, "fsdp_config": {"version": 1, "reshard_after_forward": false}}`, opts: Options{Seq: 512, GPUs: 8},
			want: "args.json:1: key fsdp_config.reshard_after_forward: FSDP1's reshard_after_forward is its sharding strategy, got false", wantHint: "shard_grad_op"},
		{name: "fsdp: true under transformers 4", file: "args.json", config: args + `, "fsdp": true, "memsh.transformers": "4.57.1"}`, opts: Options{Seq: 512, GPUs: 8},
			want: "args.json:1: key fsdp: say which sharding (fsdp: true is transformers 5's, with memsh.transformers=4.57.1)", wantHint: "full_shard"},
		{name: "a backward prefetch FSDP1 does not have", file: "args.json", opts: Options{Seq: 512, GPUs: 8},
			config: args + `, "fsdp": "full_shard auto_wrap", "fsdp_config": {"backward_prefetch": "backward_both"}}`,
			want:   "args.json:1: key fsdp_config.backward_prefetch: unknown backward prefetch backward_both", wantHint: "NO_PREFETCH"},
		{name: "two sequence lengths", file: "sft.yaml", config: "model_name_or_path: mistralai/Mistral-7B-v0.1\nper_device_train_batch_size: 2\nmax_length: 1024\nmax_seq_length: 2048\ngradient_checkpointing: false\n",
			want: "sft.yaml:4: key max_seq_length: 2048 and max_length 1024 disagree", wantHint: "max_length"},
	})
}

// TestHFFSDP1ForwardPrefetch: the Trainer's fsdp_config forward_prefetch
// (or fsdp_forward_prefetch) is FSDP1's forward_prefetch
// (parallel(fsdp_forward_prefetch=True)); the Trainer passes none for
// FSDP2 (transformers 5.25.0 training_args.py l.2857-2874).
func TestHFFSDP1ForwardPrefetch(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "zephyr-7b-beta SFT, full, FSDP1 with forward prefetch on 8 GPUs",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"fsdp=full_shard auto_wrap", "fsdp_config.fsdp_version=1", "fsdp_config.fsdp_forward_prefetch=true"}},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none", fsdp_forward_prefetch = True))`,
	}, {
		name:        "the same under FSDP2: the key changes nothing",
		file:        "hf/zephyr_sft_full.yaml",
		step:        hfStep(16, 1, 8, 2048),
		opts:        Options{GPUs: 8, Overrides: []string{"fsdp=full_shard auto_wrap", "fsdp_config.forward_prefetch=true"}},
		notModelled: []string{hfFSDPVersionUnset},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}})
}
