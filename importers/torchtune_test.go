package importers

import (
	"strings"
	"testing"
)

// TestTorchtune imports torchtune's own recipe configs (testdata/torchtune,
// README there names each file's commit) and checks each plan against the
// one written by hand from the recipe: the model of model._component_,
// batch_size, the sequence (--seq when max_seq_len is null), dtype bf16 as
// pure bf16, the optimizer component (in backward with optimizer_in_bwd),
// enable_activation_checkpointing as full checkpointing of every layer,
// LinearCrossEntropyLoss's 8 output chunks, the LoRA builders' adapters,
// QLoRA's torchao NF4 base, and the distributed recipe's FSDP2.
func TestTorchtune(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "8B_full_single_device",
		file: "torchtune/llama3_1_8B_full_single_device.yaml",
		step: torchtuneStep(2, 1, 1, 1, 1, 2048),
		opts: Options{Seq: 2048},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 2048, precision = "bf16", optimizer = paged_adamw8bit(in_backward = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB")`,
	}, {
		name: "8B_lora_single_device",
		file: "torchtune/llama3_1_8B_lora_single_device.yaml",
		step: torchtuneStep(2, 8, 1, 1, 1, 4096),
		opts: Options{Seq: 4096, GPU: "A100-40GB"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             lora = lora(rank = 8, alpha = 16, targets = ["q", "v", "o", "gate", "up", "down"], autocast_adapter_dtype = False), checkpoint = "full",
             loss_chunks = 8, gpu = "A100-40GB")`,
	}, {
		name: "8B_qlora_single_device",
		file: "torchtune/llama3_1_8B_qlora_single_device.yaml",
		step: torchtuneStep(2, 8, 1, 1, 1, 2048),
		opts: Options{Seq: 2048, GPU: "RTX-4090"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 2048, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             lora = lora(rank = 8, alpha = 16, targets = ["q", "v", "o", "gate", "up", "down"], autocast_adapter_dtype = False), quant = "torchao-nf4",
             checkpoint = "full", loss_chunks = 8, gpu = "RTX-4090")`,
	}, {
		name: "8B_full on 8 GPUs",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name: "8B_full on 8 GPUs in float8 (torchtune's default recipe: tensorwise, gathered in fp8)",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"enable_fp8_training=True"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, float8 = "tensorwise", fsdp_float8_all_gather = True, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name: "8B_full on 8 GPUs in float8, rowwise",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"enable_fp8_training=True", "fp8_recipe_name=rowwise"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, float8 = "rowwise", gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name:  "8B_full on 2 nodes, the model from its config.json",
		file:  "torchtune/llama3_1_8B_full.yaml",
		step:  torchtuneStep(2, 1, 16, 1, 1, 1024),
		opts:  Options{Seq: 1024, GPUs: 8, Nodes: 2, Model: "llama-3-8b.json"},
		files: map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"},
		hand: `plan = train(hf_config("llama-3-8b.json", pad_labels = False, position_ids = False), batch = 2, seq = 1024, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB", cluster = cluster(nodes = 2, gpus_per_node = 8),
             parallel = parallel(dp = 16, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name: "1B_full_single_device with compile, packing and offload overridden",
		file: "torchtune/llama3_2_1B_full_single_device.yaml",
		step: torchtuneStep(4, 4, 1, 1, 1, 8192),
		opts: Options{Model: "llama-3-8b.json", Overrides: []string{"compile=True", "dataset.packed=True", "tokenizer.max_seq_len=8192",
			"enable_activation_checkpointing=True", "enable_activation_offloading=True", "optimizer_in_bwd=False", "gradient_accumulation_steps=4"}},
		files: map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"},
		hand: `plan = train(hf_config("llama-3-8b.json", pad_labels = False, position_ids = False), batch = 4, seq = 8192, grad_accum = 4, precision = "bf16", optimizer = paged_adamw8bit(),
             checkpoint = "full", compile = True, offload = offload(activations = "cpu"), loss_chunks = 8, gpu = "H100-80GB")`,
	}, {
		// full_finetune_distributed.py (pytorch/torchtune bd2a0fc, lines 1019-1027)
		// calls backward on every micro-batch and steps every
		// gradient_accumulation_steps; no recipe turns FSDP2's gradient sync
		// off (no set_requires_gradient_sync or no_sync anywhere in the repo),
		// so each micro-batch reduce-scatters its gradients: no fsdp_no_sync.
		name: "8B_full on 8 GPUs accumulating 4 micro-batches, gradients reduced each one",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 4, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"gradient_accumulation_steps=4"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, grad_accum = 4, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		// full_finetune_distributed.py:343-356 (bd2a0fc): compile as a mapping
		// compiles the layers when compile.model is (its default True).
		name: "8B_full with compile as the distributed recipe's mapping",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"compile=null", "compile.loss=False", "compile.optimizer_step=True"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", compile = True, loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name: "8B_full with compile.model off",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"compile=null", "compile.model=False"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		// qat_distributed.py (bd2a0fc): quantizer.prepare swaps every
		// nn.Linear for torchao's Int8DynActInt4WeightQATLinear; Llama
		// 3.2's tied output is TiedLinear, not swapped.
		name:  "3B_qat_full: torchao's 8da4w QAT, the tied output plain",
		file:  "torchtune/llama3_2_3B_qat_full.yaml",
		step:  torchtuneStep(4, 8, 8, 1, 1, 2048),
		opts:  Options{Seq: 2048, GPUs: 8, Model: "llama-3-8b.json"},
		files: map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"},
		hand: `plan = train(hf_config("llama-3-8b.json", pad_labels = False, position_ids = False), batch = 4, seq = 2048, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, qat = "8da4w", qat_head = False, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True))`,
	}, {
		// Llama 3.1 8B's output is an untied nn.Linear: swapped, and
		// LinearCrossEntropyLoss runs it on each of its 8 chunks, each
		// fake-quantizing the whole weight: said, and left plain.
		name:        "8B_qat_full: the untied output under chunks is not modelled",
		file:        "torchtune/llama3_1_8B_qat_full.yaml",
		step:        torchtuneStep(2, 1, 8, 1, 1, 2048),
		opts:        Options{Seq: 2048, GPUs: 8},
		notModelled: []string{"quantizer: the untied output swapped under LinearCrossEntropyLoss's chunks (each chunk fake-quantizes the whole output weight; memsh leaves the output plain)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 2048, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, qat = "8da4w", qat_head = False, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		// qat_lora_finetune_distributed.py (bd2a0fc): swap_lora_linear_with_qat
		// swaps the LoRALinear modules only (QATLoRALinear).
		name: "3B_qat_lora: QAT-LoRA on the adapted linears",
		file: "torchtune/llama3_2_3B_qat_lora.yaml",
		step: torchtuneStep(4, 8, 8, 1, 1, 2048),
		opts: Options{Seq: 2048, GPUs: 8},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3.2-3b", pad_labels = False, position_ids = False), batch = 4, seq = 2048, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             lora = lora(rank = 64, alpha = 128, targets = ["q", "v", "o", "gate", "up", "down"], autocast_adapter_dtype = False),
             loss_chunks = 8, qat = "8da4w", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True))`,
	}, {
		// knowledge_distillation_distributed.py (bd2a0fc) holds a frozen
		// teacher next to the student: said, not replayed.
		name:  "8B_to_1B_KD_lora_distributed: the teacher is not modelled",
		file:  "torchtune/llama3_2_8B_to_1B_KD_lora_distributed.yaml",
		step:  torchtuneStep(4, 8, 8, 1, 1, 2048),
		opts:  Options{Seq: 2048, GPUs: 8, Model: "llama-3-8b.json"},
		files: map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"},
		notModelled: []string{
			"teacher_model: knowledge distillation's frozen teacher model, its forward and its logits",
			"teacher_checkpointer: the teacher model's checkpoint (with teacher_model)",
			"kd_loss: knowledge distillation's loss over the student's and teacher's logits",
			"kd_ratio: knowledge distillation's loss weight (with teacher_model)",
		},
		hand: `plan = train(hf_config("llama-3-8b.json", pad_labels = False, position_ids = False), batch = 4, seq = 2048, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             lora = lora(rank = 64, alpha = 128, targets = ["q", "v", "o", "gate", "up", "down"], autocast_adapter_dtype = False),
             loss_chunks = 8, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True))`,
	}, {
		// base_llama_tp_plan (torchtune/models/llama3/_parallelism.py at bd2a0fc):
		// sequence-parallel norms between DTensor's colwise and rowwise linears;
		// LinearCrossEntropyLoss's patch_tp_plan keeps the logits sharded
		// (modules/loss/cross_entropy_loss.py:75-85) under loss_parallel()
		name:        "8B_full on 8 GPUs with tensor_parallel_dim 2 and base_llama_tp_plan",
		file:        "torchtune/llama3_1_8B_full.yaml",
		step:        torchtuneStep(2, 1, 8, 2, 1, 4096),
		opts:        Options{Seq: 4096, GPUs: 8, Overrides: []string{"tensor_parallel_dim=2", "tensor_parallel_plan._component_=torchtune.models.llama3.base_llama_tp_plan"}},
		notModelled: []string{"loss.num_output_chunks: 8 output chunks with tensor parallelism (memsh replays the logits unchunked)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, tp = 2, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch",
                                 fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name: "tensor parallelism with CEWithChunkedOutputLoss: the logits gathered, said",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 2, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"tensor_parallel_dim=2", "tensor_parallel_plan._component_=torchtune.models.llama3.base_llama_tp_plan",
			"loss._component_=torchtune.modules.loss.CEWithChunkedOutputLoss"}},
		notModelled: []string{
			"loss._component_: torchtune.modules.loss.CEWithChunkedOutputLoss with tensor parallelism: the output's logits gathered whole on every rank (memsh keeps them sharded over the vocabulary)",
			"loss.num_output_chunks: 8 output chunks with tensor parallelism (memsh replays the logits unchunked)",
		},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, tp = 2, sequence_parallel = True, tp_runtime = "torch", fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		// training.get_dtype (torchtune/training/precision.py:77-101): None is float32
		name: "8B_full with dtype null: fp32",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"dtype=null"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "fp32", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		// qlora_llama3_1_8b = partial(lora_llama3_1_8b, quantize_base=True)
		// (torchtune/models/llama3_1/_model_builders.py:250 at bd2a0fc)
		name: "8B_lora_single_device with quantize_base: QLoRA's NF4 base",
		file: "torchtune/llama3_1_8B_lora_single_device.yaml",
		step: torchtuneStep(2, 8, 1, 1, 1, 2048),
		opts: Options{Seq: 2048, GPU: "RTX-4090", Overrides: []string{"model.quantize_base=True"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 2048, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             lora = lora(rank = 8, alpha = 16, targets = ["q", "v", "o", "gate", "up", "down"], autocast_adapter_dtype = False), quant = "torchao-nf4",
             checkpoint = "full", loss_chunks = 8, gpu = "RTX-4090")`,
	}, {
		// recipes/full_finetune_distributed.py:166-168 (bd2a0fc):
		// context_parallel_rotate_method allgather by default, torch's
		// set_rotate_method as under torchtitan
		name: "8B_full on 8 GPUs with context_parallel_dim 2: the KV shards all-gathered",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 2, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"context_parallel_dim=2"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, cp = 2, cp_mode = "allgather", fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		name:        "context_parallel_dim 2 with the alltoall rotate method: torch's ring",
		file:        "torchtune/llama3_1_8B_full.yaml",
		step:        torchtuneStep(2, 1, 8, 1, 2, 4096),
		opts:        Options{Seq: 4096, GPUs: 8, Overrides: []string{"context_parallel_dim=2", "context_parallel_rotate_method=alltoall"}},
		notModelled: []string{"context_parallel_rotate_method: alltoall (torch's ring: memsh's ring attention, without torch's fp32 merges of the steps' outputs)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, cp = 2, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}, {
		// ParallelDims (torchtune/training/_distributed.py:72-90): 2 x 4 = 8 GPUs, HSDP
		name: "8B_full on 8 GPUs as 2 replicas of 4 shards, both degrees given",
		file: "torchtune/llama3_1_8B_full.yaml",
		step: torchtuneStep(2, 1, 8, 1, 1, 4096),
		opts: Options{Seq: 4096, GPUs: 8, Overrides: []string{"data_parallel_replicate_dim=2", "data_parallel_shard_dim=4"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 4096, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = 8, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = True, dp_replicate = 2, fsdp_units = ["embed_tokens", "lm_head"]))`,
	}})
}

func TestTorchtuneErrors(t *testing.T) {
	const model = "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\n"
	runErrorCases(t, []errorCase{
		{name: "no sequence length", file: "r.yaml", config: model + "batch_size: 2\ntokenizer:\n  max_seq_len: null\n",
			want: "r.yaml:5: key tokenizer.max_seq_len: is null: batches are padded to their longest sample, which the config does not say", wantHint: "--seq N"},
		{name: "a model memsh does not know", file: "r.yaml", config: "model:\n  _component_: torchtune.models.gemma2.gemma2_2b\nbatch_size: 1\n", opts: Options{Seq: 8},
			want: "r.yaml:2: key model._component_: memsh's zoo has no model for torchtune.models.gemma2.gemma2_2b", wantHint: "--model config.json"},
		{name: "optimizer in backward with accumulation", file: "r.yaml", config: model + "batch_size: 2\noptimizer_in_bwd: True\ngradient_accumulation_steps: 4\n", opts: Options{Seq: 8},
			want: "r.yaml:4: key optimizer_in_bwd: cannot step in backward with gradient_accumulation_steps 4", wantHint: "gradient_accumulation_steps: 1"},
		{name: "offload without checkpointing", file: "r.yaml", config: model + "batch_size: 2\nenable_activation_offloading: True\n", opts: Options{Seq: 8},
			want: "r.yaml:4: key enable_activation_offloading: needs enable_activation_checkpointing", wantHint: "enable_activation_checkpointing: True"},
		{name: "a batch that is not a number", file: "r.yaml", config: model + "batch_size: two\n", opts: Options{Seq: 8},
			want: `r.yaml:3: key batch_size: want a whole number, got two`},
		{name: "a negative batch", file: "r.yaml", config: model + "batch_size: -1\n", opts: Options{Seq: 8},
			want: `r.yaml:3: key batch_size: -1 is out of range (want 1 to 16777216)`},
		{name: "fp16", file: "r.yaml", config: model + "batch_size: 1\ndtype: fp16\n", opts: Options{Seq: 8},
			want: "r.yaml:4: key dtype: unknown dtype fp16", wantHint: "bf16 or fp32"},
		{name: "an unknown optimizer", file: "r.yaml", config: model + "batch_size: 1\noptimizer:\n  _component_: torchao.optim.AdamW4bit\n", opts: Options{Seq: 8},
			want: "r.yaml:5: key optimizer._component_: unknown optimizer torchao.optim.AdamW4bit", wantHint: "PagedAdamW8bit"},
		{name: "an unknown LoRA module", file: "r.yaml", opts: Options{Seq: 8},
			config: "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_attn_modules: [q_proj, w1]\n  lora_rank: 8\nbatch_size: 1\n",
			want:   "r.yaml:3: key model.lora_attn_modules: unknown module w1", wantHint: "output_proj"},
		{name: "GPUs that tensor parallelism does not divide", file: "r.yaml", config: model + "batch_size: 1\ntensor_parallel_dim: 3\n", opts: Options{Seq: 8, GPUs: 8},
			want: "r.yaml:4: key tensor_parallel_dim: 8 GPUs do not divide into tp 3 x cp 1 x replicate 1", wantHint: "divide the GPUs"},
		{name: "tensor parallelism without a plan", file: "r.yaml", config: model + "batch_size: 1\ntensor_parallel_dim: 2\n", opts: Options{Seq: 8, GPUs: 8},
			want: "r.yaml:4: key tensor_parallel_dim: tensor parallelism without a tensor_parallel_plan", wantHint: "base_llama_tp_plan"},
		{name: "an unknown rotate method", file: "r.yaml", config: model + "batch_size: 1\ncontext_parallel_rotate_method: ring\n", opts: Options{Seq: 8},
			want: "r.yaml:4: key context_parallel_rotate_method: unknown rotate method ring", wantHint: "allgather and alltoall"},
		{name: "a shard degree that is not the GPUs left", file: "r.yaml", config: model + "batch_size: 1\ndata_parallel_shard_dim: 2\n", opts: Options{Seq: 8, GPUs: 8},
			want: "r.yaml:4: key data_parallel_shard_dim: replicate 1 x shard 2 x tp 1 x cp 1 is not the job's 8 GPUs", wantHint: "-1"},
		{name: "clipping with the optimizer in backward on several GPUs", file: "r.yaml", config: model + "batch_size: 1\noptimizer_in_bwd: True\nclip_grad_norm: 1.0\n", opts: Options{Seq: 8, GPUs: 8},
			want: "r.yaml:5: key clip_grad_norm: gradient clipping with optimizer_in_bwd", wantHint: "clip_grad_norm: null"},
		{name: "clipping with the optimizer in backward on one GPU (full_finetune_single_device.py raises too)", file: "r.yaml", config: model + "batch_size: 1\noptimizer_in_bwd: True\nclip_grad_norm: 1.0\n", opts: Options{Seq: 8},
			want: "r.yaml:5: key clip_grad_norm: gradient clipping with optimizer_in_bwd", wantHint: "clip_grad_norm: null"},
		{name: "malformed YAML", file: "r.yaml", config: "model: [\n", want: "r.yaml:1: not valid YAML: did not find expected node content"},
		{name: "not a mapping", file: "r.yaml", config: "- 1\n- 2\n", want: "r.yaml:1: want a mapping of keys at the top of the file"},
		{name: "not a trainer's config", file: "r.yaml", config: "a: 1\n", want: "r.yaml: not a config memsh check knows", wantHint: "--trainer"},
		{name: "an override that is not key=value", file: "r.yaml", config: model + "batch_size: 1\n", opts: Options{Seq: 8}, overrides: []string{"batch_size"},
			want: "command line: override batch_size is not key=value", wantHint: "batch_size=4"},
		{name: "an override of the wrong type", file: "r.yaml", config: model + "batch_size: 1\n", opts: Options{Seq: 8}, overrides: []string{"batch_size=[1, 2]"},
			want: "command line: key batch_size: want a whole number, got a list"},
	})
}

// TestTorchtuneZooBuilders: torchtune's Llama 3.2, Qwen2/2.5 and Qwen3
// builders are the zoo's models of their shapes (models.go), run as
// torchtune runs them (its loader shifts the labels, its model makes no
// position_ids).
func TestTorchtuneZooBuilders(t *testing.T) {
	for comp, want := range map[string]string{
		"torchtune.models.llama3_2.llama3_2_1b":         `llama("llama3.2-1b", pad_labels = False, position_ids = False)`,
		"torchtune.models.qwen2.qwen2_0_5b":             `qwen2("0.5b", pad_labels = False, position_ids = False)`,
		"torchtune.models.qwen2_5.qwen2_5_3b":           `qwen2("3b", pad_labels = False, position_ids = False)`,
		"torchtune.models.qwen2_5.qwen2_5_72b_instruct": `qwen2("72b", pad_labels = False, position_ids = False)`,
		"torchtune.models.qwen3.qwen3_4b_instruct":      `qwen3("4b", pad_labels = False, position_ids = False)`,
		"torchtune.models.qwen3.qwen3_32b":              `qwen3("32b", pad_labels = False, position_ids = False)`,
		"torchtune.models.phi4.phi4_14b":                `phi4("14b", pad_labels = False, position_ids = False)`,
	} {
		res, err := Import("r.yaml", []byte("model:\n  _component_: "+comp+"\nbatch_size: 1\n"), defaults(Options{Seq: 8}))
		if err != nil {
			t.Errorf("%s: %v", comp, err)
			continue
		}
		if !strings.Contains(res.Script, want) {
			t.Errorf("%s: want %s in\n%s", comp, want, res.Script)
		}
	}
}
