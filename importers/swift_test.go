package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// swiftPadded is the note of an unpacked ms-swift run at max_length 2048.
const swiftPadded = "max_length: unpacked rows are padded to the batch's longest, at most 2048 tokens: memsh replays rows of 2048 (--seq N for another length)"

// swiftLoRA is the adapters ms-swift's examples ask for (--lora_rank 8
// --lora_alpha 32 --target_modules all-linear, TunerArguments' defaults
// too), with its default dropout 0.05.
const swiftLoRAExpr = `lora = lora(rank = 8, alpha = 32, targets = ["all-linear"], dropout = 0.05)`

// TestSwift imports ms-swift's examples/train scripts (testdata/README.md
// names their commit) and checks each plan against one written by hand
// from ms-swift's defaults (swift.go): Qwen2.5-7B-Instruct from the zoo
// in the --torch_dtype the script gives; gradient checkpointing on,
// reentrant on one process and under DeepSpeed, with the embedding's
// output requiring grad (enable_input_require_grads); the DDP example's
// gradient_checkpointing_kwargs non-reentrant; $(expr 16 /
// $nproc_per_node) evaluated; --deepspeed zero2 and zero3 as ms-swift's
// own presets (swift_config/), their "auto" values filled as the Trainer
// fills them; a full fine-tune's weights and AdamW state in bf16 without
// DeepSpeed (the model loaded in bf16, Trainer's bf16 autocast); QLoRA's
// nf4 with double quantization (bnb_4bit_use_double_quant).
func TestSwift(t *testing.T) {
	const zero3 = "parallel = parallel(dp = 2, zero = 3, reduce_bucket_size = \"auto\", stage3_prefetch_bucket_size = \"auto\", stage3_param_persistence_threshold = \"auto\", stage3_max_live_parameters = 1000000000)"
	ds3Notes := []string{swiftPadded,
		"deepspeed.zero_optimization.stage3_max_reuse_distance: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
		"deepspeed.zero_optimization.sub_group_size: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
		"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
	}
	ds2Notes := []string{swiftPadded,
		"deepspeed.zero_optimization.allgather_bucket_size: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
		"deepspeed.zero_optimization.allgather_partitions: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
		"deepspeed.zero_optimization.reduce_scatter: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
		"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
	}
	const qwen = `load("@stdlib//llm.star", "qwen2")
`
	// yamlDS2Plan is ms-swift's examples/yaml/deepspeed run as a YAML or JSON
	// config, or a script naming one: LoRA on Qwen2.5-7B under ZeRO-2 on 2 GPUs.
	const yamlDS2Plan = qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 8, precision = "bf16-mixed",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB",
             parallel = parallel(dp = 2, zero = 2, reduce_bucket_size = 200000000), clip_grad_norm = 1.0)`
	qwen3 := map[string]string{"qwen3-8b.json": "../../sim/testdata/hf/qwen3-8b.json"}
	runImportCases(t, []importCase{{
		name:        "LoRA on one GPU (lora_sft.sh)",
		file:        "swift/lora_sft.sh",
		step:        hfStep(1, 16, 1, 2048),
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name:        "full fine-tune on one GPU (full/train.sh)",
		file:        "swift/full_train.sh",
		step:        hfStep(1, 16, 1, 2048),
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), batch = 1, seq = 2048, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name:        "LoRA under DDP on 2 GPUs, non-reentrant as the script says (multi-gpu/ddp)",
		file:        "swift/ddp_train.sh",
		step:        hfStep(1, 8, 2, 2048),
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 8, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", input_requires_grad = True), gpu = "H100-80GB", parallel = parallel(dp = 2), clip_grad_norm = 1.0)`,
	}, {
		name:        "LoRA under ms-swift's zero2 preset (multi-gpu/deepspeed)",
		file:        "swift/deepspeed_train_zero2.sh",
		step:        hfStep(1, 8, 2, 2048),
		notModelled: ds2Notes,
		hand:        yamlDS2Plan,
	}, {
		name:        "LoRA under ms-swift's zero3 preset (multi-gpu/deepspeed)",
		file:        "swift/deepspeed_train_zero3.sh",
		step:        hfStep(1, 8, 2, 2048),
		notModelled: ds3Notes,
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 8, precision = "bf16-mixed",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", ` + zero3 + `, clip_grad_norm = 1.0)`,
	}, {
		name:        "QLoRA with bitsandbytes (qlora/bnb)",
		file:        "swift/qlora_bnb_train.sh",
		step:        hfStep(1, 16, 1, 2048),
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), quant = "nf4-dq", ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name: "packed rows with flash attention (packing/llm.sh)",
		file: "swift/packing_llm.sh",
		step: hfStep(1, 4, 1, 2048),
		hand: qwen + `plan = train(qwen2("7b", attn = "flash"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 4, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// no --torch_dtype: the config.json's (Qwen3-8B's bfloat16); no
		// batch or accumulation: 1, and ceil(16 / 1 / 4) = 4 over 4 GPUs;
		// DDP without kwargs: non-reentrant
		name:        "the defaults: a Qwen3-8B config.json over 4 processes, 3.x's --train_type",
		file:        "swift/ddp_train.sh",
		step:        hfStep(1, 4, 4, 2048),
		opts:        Options{Model: "qwen3-8b.json", Overrides: []string{"env.NPROC_PER_NODE=4", "env.CUDA_VISIBLE_DEVICES=0,1,2,3", "tuner_type=null", "train_type=full", "torch_dtype=null", "per_device_train_batch_size=null", "gradient_accumulation_steps=null", "gradient_checkpointing_kwargs=null"}},
		files:       qwen3,
		notModelled: []string{swiftPadded},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), batch = 1, seq = 2048, grad_accum = 4, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", input_requires_grad = True), clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 4))`,
	}, {
		// --lora_dtype float32: PEFT's fp32 adapters, as without it;
		// PYTORCH_CUDA_ALLOC_CONF's expandable segments; fp32 weights
		// under the Trainer's fp16 autocast (_init_mixed_precision)
		name: "lora_dtype, expandable segments and fp32 weights",
		file: "swift/lora_sft.sh",
		step: hfStep(1, 16, 1, 1024),
		opts: Options{Seq: 1024, Overrides: []string{"lora_dtype=float32", "torch_dtype=float32", "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"}},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 1024, grad_accum = 16, precision = "fp16-mixed",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", expandable_segments = True, clip_grad_norm = 1.0)`,
	}, {
		// --fsdp fsdp2: ms-swift's preset (full_shard auto_wrap, FSDP2,
		// activation_checkpointing: gradient checkpointing off for
		// accelerate's non-reentrant checkpoint wrapper); accelerate
		// accumulates FSDP2 gradients unsharded (fsdp_no_sync)
		name:        "LoRA under ms-swift's fsdp2 preset",
		file:        "swift/ddp_train.sh",
		step:        hfStep(1, 8, 2, 2048),
		opts:        Options{Overrides: []string{"fsdp=fsdp2", "gradient_checkpointing_kwargs=null"}},
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 8, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", input_requires_grad = True), gpu = "H100-80GB",
             parallel = parallel(dp = 2, fsdp = 2, fsdp_no_sync = True), clip_grad_norm = 1.0)`,
	}, {
		// a multimodal config.json: ms-swift's freeze_vit and
		// freeze_aligner (true by default) listed; MAX_PIXELS listed
		name:  "a vision-language model's frozen tower, listed",
		file:  "swift/lora_sft.sh",
		step:  hfStep(1, 16, 1, 2048),
		opts:  Options{Model: "vl.json", Overrides: []string{"env.MAX_PIXELS=1003520"}},
		files: map[string]string{"vl.json": "../../sim/testdata/hf/qwen2.5-vl-3b-instruct.json"},
		notModelled: []string{
			"freeze_vit true, freeze_aligner true, freeze_llm false: ms-swift trains only the parts not frozen (LoRA's all-linear on their linear layers, a lora fine-tune of them); memsh's plan makes the vision tower's and aligner's weights trainable too (adapters on their linear layers; in full, their gradients and optimizer states)",
			swiftPadded, "env.MAX_PIXELS: 1003520: a multimodal model's image or video sizes, which decide its vision tokens: memsh replays text rows of max_length"},
		hand: `plan = train(hf_config("vl.json", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// torchrun --nproc_per_node=4 --nnodes=2 swift/cli/sft.py: its
		// flags start the processes; $(expr 32 / $nproc_per_node / $nnodes)
		name:        "a full fine-tune on 2 nodes of 4 under torchrun and zero2 (multi-node/torchrun)",
		file:        "swift/multi_node_torchrun_node1.sh",
		step:        hfStep(1, 4, 8, 8192),
		notModelled: append([]string{strings.ReplaceAll(swiftPadded, "2048", "8192")}, ds2Notes[1:]...),
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), batch = 1, seq = 8192, grad_accum = 4, precision = "bf16-mixed",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB",
             parallel = parallel(dp = 8, zero = 2, reduce_bucket_size = 200000000), cluster = cluster(nodes = 2, gpus_per_node = 4), clip_grad_norm = 1.0)`,
	}, {
		// no --max_length: ms-swift's max_model_len, the least of the
		// config.json's length keys (Qwen3-8B's max_position_embeddings)
		name:  "no max_length: the model's max_model_len",
		file:  "swift/lora_sft.sh",
		step:  hfStep(1, 16, 1, 40960),
		opts:  Options{Model: "qwen3-8b.json", Overrides: []string{"max_length=null"}},
		files: qwen3,
		notModelled: []string{"max_length: unset, so ms-swift cuts rows at the model's max_model_len, 40960 (its config.json: BaseArguments.__post_init__, get_max_model_len)",
			strings.ReplaceAll(swiftPadded, "2048", "40960")},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 40960, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// `swift sft examples/yaml/deepspeed/sft.yaml`: the config file's
		// keys as arguments (parse_yaml_args), read from the script's folder
		name:        "a script naming a YAML config (examples/yaml/deepspeed)",
		file:        "swift/yaml_deepspeed_sft.sh",
		step:        hfStep(1, 8, 2, 2048),
		opts:        Options{ReadFile: readSwiftTestdata},
		notModelled: ds2Notes,
		hand:        yamlDS2Plan,
	}, {
		// the YAML and its JSON twin checked on their own, --gpus 2 the
		// processes a node
		name:        "a YAML config on its own",
		file:        "swift/examples/yaml/deepspeed/sft.yaml",
		step:        hfStep(1, 8, 2, 2048),
		opts:        Options{GPUs: 2},
		notModelled: ds2Notes,
		hand:        yamlDS2Plan,
	}, {
		name:        "a JSON config on its own",
		file:        "swift/examples/yaml/deepspeed/sft.json",
		step:        hfStep(1, 8, 2, 2048),
		opts:        Options{GPUs: 2},
		notModelled: ds2Notes,
		hand:        yamlDS2Plan,
	}, {
		// swift pt: PretrainArguments is SftArguments with the chat
		// template off and every token's loss (pretrain_args.py): the same step
		name:        "swift pt",
		file:        "swift/lora_sft.sh",
		step:        hfStep(1, 16, 1, 2048),
		opts:        Options{Overrides: []string{"launcher.command=swift pt"}},
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// SWIFT_SINGLE_DEVICE_MODE=1: one device a process whatever it
		// sees (is_mp), so 2 GPUs seen by one process train on one
		name:        "SWIFT_SINGLE_DEVICE_MODE",
		file:        "swift/lora_sft.sh",
		step:        hfStep(1, 16, 1, 2048),
		opts:        Options{Overrides: []string{"env.CUDA_VISIBLE_DEVICES=0,1", "env.SWIFT_SINGLE_DEVICE_MODE=1"}},
		notModelled: []string{swiftPadded},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), ` + swiftLoRAExpr + `, batch = 1, seq = 2048, grad_accum = 16, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name: "lora_dtype as the weights'",
		file: "swift/lora_sft.sh",
		step: hfStep(1, 16, 1, 1024),
		opts: Options{Seq: 1024, Overrides: []string{"lora_dtype=bfloat16", "gradient_checkpointing=false"}},
		hand: qwen + `plan = train(qwen2("7b", attn = "sdpa"), lora = lora(rank = 8, alpha = 32, targets = ["all-linear"], dropout = 0.05, autocast_adapter_dtype = False),
             batch = 1, seq = 1024, grad_accum = 16, precision = "bf16", optimizer = adamw(fused = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}})
}

// TestSwiftErrors: what ms-swift refuses, and what memsh does not model,
// each named at its argument with a hint.
func TestSwiftErrors(t *testing.T) {
	const cmd = "CUDA_VISIBLE_DEVICES=0 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048"
	runErrorCases(t, []errorCase{
		{name: "a script without ms-swift or Megatron-LM", file: "run.sh", config: "echo hi\n",
			want: "run.sh: the script never launches pretrain_gpt.py, ms-swift's `swift sft`, `pt` or `rlhf`, or OpenRLHF's openrlhf.cli.train_sft", wantHint: "NPROC_PER_NODE=8 swift sft"},
		{name: "device_map over several GPUs", file: "run.sh", config: "CUDA_VISIBLE_DEVICES=0,1 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048\n",
			want: "run.sh: key env.NPROC_PER_NODE: unset: ms-swift then runs one process over the 2 GPUs it sees, the model's layers spread over them (device_map), which memsh does not model", wantHint: "NPROC_PER_NODE=2"},
		{name: "device_map with DDP (multi-gpu/ddp_device_map)", file: "run.sh", config: "CUDA_VISIBLE_DEVICES=0,1,2,3 NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048\n",
			want: "run.sh:1: key env.NPROC_PER_NODE: 2 processes a node over 4 GPUs: ms-swift spreads each process's model over 2 of them (device_map with DDP), which memsh does not model", wantHint: "NPROC_PER_NODE=4"},
		{name: "GPUs that do not divide among the processes", file: "run.sh", config: "CUDA_VISIBLE_DEVICES=0,1,2 NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048\n",
			want: "run.sh:1: key env.NPROC_PER_NODE: 3 GPUs seen do not divide among 2 processes a node (ms-swift asserts n_gpu % local_world_size == 0)", wantHint: "CUDA_VISIBLE_DEVICES"},
		{name: "--gpus against the script's processes", file: "run.sh", config: "NPROC_PER_NODE=4 " + cmd[len("CUDA_VISIBLE_DEVICES=0 "):] + "\n", opts: Options{GPUs: 8},
			want: "run.sh:1: key env.NPROC_PER_NODE: 4 processes a node, where --gpus says 8", wantHint: "--gpus"},
		{name: "fewer GPUs seen than processes", file: "run.sh", config: "NPROC_PER_NODE=4 " + cmd + "\n",
			want: "run.sh:1: key env.NPROC_PER_NODE: 4 processes a node see 1 GPUs", wantHint: "CUDA_VISIBLE_DEVICES"},
		{name: "both names of the tuner", file: "run.sh", config: cmd + " --train_type lora --tuner_type full\n",
			want: "run.sh:1: key train_type: and tuner_type are both given", wantHint: "--tuner_type"},
		{name: "a tuner memsh does not replay", file: "run.sh", config: cmd + " --tuner_type adalora\n",
			want: "run.sh:1: key tuner_type: tuner adalora is not modelled", wantHint: "lora and full"},
		{name: "packing without flash attention", file: "run.sh", config: cmd + " --packing true\n",
			want: "run.sh:1: key packing: needs a flash attention implementation (sft_args.py _check_padding_free)", wantHint: "--attn_impl flash_attn"},
		{name: "no max_length", file: "run.sh", config: "CUDA_VISIBLE_DEVICES=0 swift sft --model Qwen/Qwen2.5-7B-Instruct\n",
			want: "run.sh: key max_length: missing: ms-swift then cuts rows at the model's max_model_len, read from its config.json, which memsh does not have", wantHint: "--model config.json"},
		{name: "no model", file: "run.sh", config: "swift sft --max_length 2048\n",
			want: "run.sh: key model: missing: ms-swift requires it", wantHint: "--model"},
		{name: "arguments from a YAML file memsh cannot read", file: "run.sh", config: "swift sft sft.yaml\n",
			want: "run.sh:1: the command reads its arguments from sft.yaml, and no file can be read here", wantHint: "memsh check sft.yaml"},
		{name: "a YAML config whose ENV disagrees with --gpus", file: "sft.yaml", config: "model: Qwen/Qwen2.5-7B-Instruct\ntuner_type: lora\nmax_length: 2048\nENV:\n  NPROC_PER_NODE: 2\n", opts: Options{GPUs: 8},
			want: "sft.yaml:5: key env.NPROC_PER_NODE: 2 processes a node, where --gpus says 8", wantHint: "--gpus"},
		{name: "an argument given twice", file: "run.sh", config: cmd + " --max_length 4096\n",
			want: "run.sh:1: key max_length: given twice: 2048 and 4096", wantHint: "once"},
		{name: "adapters in fp16 over bf16 weights", file: "run.sh", config: cmd + " --torch_dtype bfloat16 --lora_dtype float16\n",
			want: "run.sh:1: key lora_dtype: adapters in float16 over bfloat16 weights are not modelled", wantHint: "bfloat16"},
		{name: "sequence parallelism", file: "run.sh", config: "NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048 --sequence_parallel_size 2\n",
			want: "run.sh:1: key sequence_parallel_size: ms-swift's sequence parallelism (Ulysses or ring attention over 2 GPUs) is not modelled", wantHint: "cp"},
		{name: "a quantization method memsh does not replay", file: "run.sh", config: cmd + " --quant_method hqq --quant_bits 4\n",
			want: "run.sh:1: key quant_method: quantization method hqq is not modelled", wantHint: "bnb"},
		{name: "a full fine-tune of a quantized model", file: "run.sh", config: cmd + " --tuner_type full --quant_method bnb --quant_bits 4\n",
			want: "run.sh:1: key quant_bits: a quantized model's weights do not train (tuner full)", wantHint: "lora"},
		{name: "ms-swift's optimizer plugins", file: "run.sh", config: cmd + " --optimizer muon\n",
			want: "run.sh:1: key optimizer: ms-swift's optimizer plugin muon is not modelled", wantHint: "--optim"},
		{name: "AutoTP", file: "run.sh", config: "NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048 --deepspeed zero2 --deepspeed_autotp_size 2\n",
			want: "run.sh:1: key deepspeed_autotp_size: DeepSpeed's AutoTP tensor parallelism is not modelled", wantHint: "tp"},
		{name: "swift rlhf's DPO", file: "run.sh", config: cmd[:len("CUDA_VISIBLE_DEVICES=0 ")] + "swift rlhf --rlhf_type dpo --model Qwen/Qwen2.5-7B-Instruct --max_length 2048\n",
			want: "run.sh:1: key rlhf_type: ms-swift's DPO trainer is not modelled: its concatenated_forward computes the logits of the completion positions only (use_logits_to_keep) and frees the policy's before the reference forward, which dpo() and kto() do not replay", wantHint: "preference = dpo(...)"},
		{name: "swift rlhf's default is DPO", file: "run.sh", config: "swift rlhf --model Qwen/Qwen2.5-7B-Instruct\n",
			want: "run.sh: key rlhf_type: ms-swift's DPO trainer is not modelled: its concatenated_forward computes the logits of the completion positions only (use_logits_to_keep) and frees the policy's before the reference forward, which dpo() and kto() do not replay", wantHint: "docs/dpo.md"},
		{name: "swift rlhf's GRPO", file: "run.sh", config: "swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct\n",
			want: "run.sh:1: key rlhf_type: ms-swift's GRPO trainer (its own rollout, vLLM engine and loss, swift/rlhf_trainers/grpo_trainer.py) is not modelled", wantHint: "grpo(...)"},
		{name: "swift rlhf's ORPO", file: "run.sh", config: "swift rlhf --rlhf_type orpo --model Qwen/Qwen2.5-7B-Instruct\n",
			want: "run.sh:1: key rlhf_type: rlhf_type orpo is not modelled (memsh replays DPO, KTO and GRPO as TRL, LLaMA-Factory and torchtune run them)", wantHint: "Starlark"},
		{name: "the entry point under accelerate launch", file: "run.sh", config: "accelerate launch --config_file fsdp.json swift/cli/sft.py --model Qwen/Qwen2.5-7B-Instruct --max_length 2048\n",
			want: "run.sh:1: ms-swift's entry point run by accelerate, which memsh does not read", wantHint: "torchrun --nproc_per_node 8 swift/cli/sft.py"},
		{name: "the entry point under python on several GPUs", file: "run.sh", config: "CUDA_VISIBLE_DEVICES=0,1 python swift/cli/sft.py --model Qwen/Qwen2.5-7B-Instruct --max_length 2048\n",
			want: "run.sh:1: key launcher.runner: python: ms-swift runs one process over the 2 GPUs it sees, the model's layers spread over them (device_map), which memsh does not model", wantHint: "NPROC_PER_NODE=2"},
		{name: "FSDP beside DeepSpeed", file: "run.sh", config: "NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048 --deepspeed zero2 --fsdp fsdp2\n",
			want: "run.sh:1: key fsdp: and deepspeed are both set", wantHint: "keep one"},
		{name: "a task other than causal LM", file: "run.sh", config: cmd + " --task_type seq_cls\n",
			want: "run.sh:1: key task_type: task_type seq_cls is not modelled (its head and loss differ)", wantHint: "causal-LM"},
	})
}

// TestSwiftNotUnderstood: an argument memsh does not know is listed, not
// dropped; one of no effect changes nothing; a typo is named.
func TestSwiftNotUnderstood(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "swift", "lora_sft.sh"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(data), "    --max_length 2048 \\\n", "    --max_length 2048 \\\n    --lora_rnak 16 \\\n    --some_new_flag 3 \\\n", 1)
	res, err := Import("lora_sft.sh", []byte(src), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Unknown, ","); got != "lora_rnak,some_new_flag" {
		t.Errorf("not understood: %q", res.Unknown)
	}
	if res.DidYouMean["lora_rnak"] != "lora_rank" {
		t.Errorf("did you mean: %q", res.DidYouMean)
	}
}

// TestExprValue: $(expr A OP B) as expr(1) prints it; anything else
// prints nothing.
func TestExprValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
		ok   bool
	}{
		{[]string{"16", "/", "2"}, 8, true},
		{[]string{"16", "/", "3"}, 5, true},
		{[]string{"7", "%", "4"}, 3, true},
		{[]string{"2", "*", "4"}, 8, true},
		{[]string{"2", "+", "4"}, 6, true},
		{[]string{"2", "-", "4"}, -2, true},
		{[]string{"2", "/", "0"}, 0, false},
		{[]string{"a", "+", "1"}, 0, false},
		{[]string{"length", "abc"}, 0, false},
		{[]string{"32", "/", "4", "/", "2"}, 4, true},
		{[]string{"2", "+", "3", "*", "4"}, 14, true},
		{[]string{"10", "-", "2", "-", "3"}, 5, true},
		{[]string{"1", "+"}, 0, false},
	} {
		got, ok := exprValue(tc.args)
		if got != tc.want || ok != tc.ok {
			t.Errorf("expr %v = %d, %v; want %d, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

// readSwiftTestdata reads a file a script names from its folder,
// testdata/swift, as memsh check does.
func readSwiftTestdata(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", "swift", name))
}
