package importers

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Notes the Axolotl examples' imports list.
const (
	axolotlKernelsNote = "lora_mlp_kernel: on by default for lora and qlora (set lora_*_kernel: false for PEFT's layers): " +
		"Axolotl's fused LoRA kernels (LoRA_MLP, LoRA_QKV, LoRA_O: custom autograd functions) save other tensors for backward than PEFT's LoRA layers, which memsh replays"
	axolotlTokensNote = "special_tokens: a token the tokenizer lacks grows embed_tokens and lm_head by a row (resize_token_embeddings): memsh keeps the config.json's vocab_size"
)

// axolotlStep is an Axolotl step: micro_batch_size x
// gradient_accumulation_steps x the GPUs (normalize_config's batch_size,
// utils/config/__init__.py l.202-230 at 067b021c8), each of sequence_len
// tokens: packed, micro_batch_size of them share one row
// (utils/trainer.py l.467-469), which changes the rows, not the tokens.
func axolotlStep(micro, accum, world, seq int64) step {
	return step{tokens: micro * accum * world * seq}
}

// TestAxolotl imports Axolotl's Llama 3 examples (testdata/README.md names
// their commit) with Llama-3-8B's config.json (NousResearch's copies of
// Meta's weights are the same model) and checks each plan against the one
// written by hand from Axolotl's defaults (axolotl.go): bf16 "auto" on an
// H100 loading the weights in bf16 under bf16 autocast; QLoRA's 4-bit nf4
// with double quantization, its norms cast back to bf16 after
// prepare_model_for_kbit_training; packed rows of micro_batch_size x
// sequence_len tokens under flash-attention 2, micro_batch_size rows of
// sequence_len under sdpa; reentrant gradient checkpointing unless the
// kwargs say otherwise.
func TestAxolotl(t *testing.T) {
	llama := map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"}
	readAxolotl := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join("testdata", "axolotl", name)) }
	const qlora = `quant = "nf4-dq", quant_storage = "bf16", lora = lora(rank = 32, alpha = 16, targets = ["all-linear"], dropout = 0.05)`
	const gc = `checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True)`
	runImportCases(t, []importCase{{
		name:        "Llama 3 QLoRA, packed",
		file:        "axolotl/llama3_qlora.yml",
		step:        axolotlStep(2, 4, 1, 4096),
		opts:        Options{Model: "llama-3-8b.json"},
		files:       llama,
		notModelled: []string{axolotlKernelsNote, axolotlTokensNote},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), ` + qlora + `, batch = 1, seq = 8192, grad_accum = 4,
             precision = "bf16", optimizer = paged_adamw(), ` + gc + `, gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// bf16 "auto" on a card without bf16: fp16 autocast over float16
		// weights; sdpa packs micro_batch_size rows of sequence_len
		name:  "Llama 3 QLoRA on a V100 with sdpa",
		file:  "axolotl/llama3_qlora.yml",
		step:  axolotlStep(2, 4, 1, 4096),
		opts:  Options{Model: "llama-3-8b.json", GPU: "V100-32GB", Overrides: []string{"attn_implementation=sdpa", "lora_mlp_kernel=false"}},
		files: llama,
		notModelled: []string{
			"sample_packing: sdpa attention over packed rows masks each sequence from the others (a block-diagonal [2, 1, 4096, 4096] mask, or torch's varlen_attn): memsh replays causal attention over the whole row",
			axolotlTokensNote},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "sdpa"), ` + qlora + `, batch = 2, seq = 4096, grad_accum = 4,
             precision = "fp16", optimizer = paged_adamw(), ` + gc + `, gpu = "V100-32GB", clip_grad_norm = 1.0)`,
	}, {
		name:        "Llama 3 QLoRA unpacked at 2,000 tokens, non-reentrant",
		file:        "axolotl/llama3_qlora.yml",
		step:        axolotlStep(2, 4, 1, 2048),
		opts:        Options{Model: "llama-3-8b.json", Overrides: []string{"sample_packing=false", "sequence_len=2000", "gradient_checkpointing_kwargs.use_reentrant=false"}},
		files:       llama,
		notModelled: []string{axolotlKernelsNote, "sequence_len: unpacked rows are padded to the batch's longest, at most 2048 tokens: memsh replays rows of 2048 (--seq N for another length)", axolotlTokensNote},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), ` + qlora + `, batch = 2, seq = 2048, grad_accum = 4,
             precision = "bf16", optimizer = paged_adamw(), checkpoint = checkpoint("full", input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// 8-bit LoRA loads float16 weights once bf16 is off
		name:        "Llama 3 8-bit LoRA, bf16 off",
		file:        "axolotl/llama3_lora_8b.yml",
		step:        axolotlStep(2, 4, 1, 4096),
		opts:        Options{Model: "llama-3-8b.json", Overrides: []string{"bf16=false"}},
		files:       llama,
		notModelled: []string{axolotlTokensNote, "lora_modules_to_save: modules trained in full beside the adapters"},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), quant = "int8", lora = lora(rank = 32, alpha = 16, targets = ["all-linear"], dropout = 0.05),
             batch = 1, seq = 8192, grad_accum = 4, precision = "fp16", optimizer = adamw8bit(), ` + gc + `, gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// Mistral-7B-v0.1 is in memsh's zoo: no --model; lora_target_linear
		// and its lora_target_modules are every linear layer but the head
		name:        "Mistral QLoRA, the zoo's model",
		file:        "axolotl/mistral_qlora.yml",
		step:        axolotlStep(2, 4, 1, 8192),
		notModelled: []string{axolotlKernelsNote},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), ` + qlora + `, batch = 1, seq = 16384, grad_accum = 4,
             precision = "bf16", optimizer = adamw8bit(), ` + gc + `, gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// FSDP1 (no fsdp_version: Axolotl's default) with fsdp_-prefixed
		// keys: QLoRA's 4-bit codes stored in bf16 and offloaded with the
		// rest; no fused LoRA kernels (not auto-enabled under FSDP1 over
		// several GPUs); sync_module_states as the Trainer passes it
		name:  "Qwen3 QLoRA under FSDP1 with CPU offload on 8 GPUs",
		file:  "axolotl/qwen3_qlora_fsdp.yaml",
		step:  axolotlStep(1, 4, 8, 2048),
		opts:  Options{Model: "qwen3-8b.json", GPUs: 8},
		files: map[string]string{"qwen3-8b.json": "../../sim/testdata/hf/qwen3-8b.json"},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "flash"), quant = "nf4-dq", quant_storage = "bf16",
             lora = lora(rank = 32, alpha = 64, targets = ["all-linear"], dropout = 0.05), batch = 1, seq = 2048, grad_accum = 4,
             precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint("full", input_requires_grad = True), clip_grad_norm = 1.0, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"), offload = offload(params = "cpu"))`,
	}, {
		// FSDP2: Axolotl casts the norms and embeddings back to bf16 (sdpa
		// then allowed); accelerate 1.11+ accumulates without gradient sync
		name:        "Llama 3.1 full fine-tune under FSDP2 on 8 GPUs, sdpa",
		file:        "axolotl/llama3_fft_8b.yaml",
		step:        axolotlStep(1, 8, 8, 8192),
		opts:        Options{Model: "llama-3-8b.json", GPUs: 8, Overrides: []string{"fsdp_version=2", "fsdp_config.reshard_after_forward=true", "attn_implementation=sdpa", "sample_packing=false"}},
		files:       llama,
		notModelled: []string{"sequence_len: unpacked rows are padded to the batch's longest, at most 8192 tokens: memsh replays rows of 8192 (--seq N for another length)", axolotlTokensNote},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "sdpa"), batch = 1, seq = 8192, grad_accum = 8,
             precision = "bf16", optimizer = paged_adamw8bit(), checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2, fsdp_no_sync = True))`,
	}, {
		// the Liger plugin with RoPE, RMSNorm, SwiGLU and fused linear
		// cross-entropy on: transformers' use_liger_kernel; FSDP1 offload
		name:  "Llama 3.1 full fine-tune with Liger under FSDP1 on 8 GPUs",
		file:  "axolotl/llama3_fft_8b_liger_fsdp.yaml",
		step:  axolotlStep(2, 4, 8, 4096),
		opts:  Options{Model: "llama-3-8b.json", GPUs: 8},
		files: llama,
		notModelled: []string{axolotlTokensNote,
			"liger_rope: Liger's RoPE kernel (in place on copies of q and k: transients only)"},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), batch = 1, seq = 8192, grad_accum = 4, precision = "bf16",
             optimizer = adamw(fused = True), checkpoint = "full", loss_chunks = "liger", liger_kernels = True, clip_grad_norm = 1.0, gpu = "H100-80GB",
             parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre"), offload = offload(params = "cpu"))`,
	}, {
		// the Trainer's per-device batch (what DeepSpeed's micro batch must
		// equal) is micro_batch_size, though each micro-batch is one
		// packed row of 2 x 8,192 tokens
		name:        "Llama 3.1 full fine-tune, 2 sequences a packed row, ZeRO-2 inline with DeepSpeed's own micro batch on 8 GPUs",
		file:        "axolotl/llama3_fft_8b.yaml",
		step:        axolotlStep(2, 8, 8, 8192),
		opts:        Options{Model: "llama-3-8b.json", GPUs: 8, Overrides: []string{"micro_batch_size=2", "deepspeed.zero_optimization.stage=2", "deepspeed.train_micro_batch_size_per_gpu=2", "deepspeed.gradient_accumulation_steps=8", "deepspeed.bf16.enabled=true"}},
		files:       llama,
		notModelled: []string{axolotlTokensNote, "deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)"},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), batch = 1, seq = 16384, grad_accum = 8, checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", precision = "bf16-mixed", optimizer = paged_adamw8bit(), parallel = parallel(dp = 8, zero = 2))`,
	}, {
		name:        "Llama 3.1 full fine-tune",
		file:        "axolotl/llama3_fft_8b.yaml",
		step:        axolotlStep(1, 8, 1, 8192),
		opts:        Options{Model: "llama-3-8b.json"},
		files:       llama,
		notModelled: []string{axolotlTokensNote},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), batch = 1, seq = 8192, grad_accum = 8,
             precision = "bf16", optimizer = paged_adamw8bit(), checkpoint = "full", clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name:  "Llama 3.1 full fine-tune under Axolotl's ZeRO-3 config on 8 GPUs, --seq 4096",
		file:  "axolotl/llama3_fft_8b.yaml",
		step:  axolotlStep(1, 8, 8, 4096),
		opts:  Options{Model: "llama-3-8b.json", GPUs: 8, Seq: 4096, Overrides: []string{"deepspeed=zero3_bf16.json"}, ReadFile: readAxolotl},
		files: llama,
		notModelled: []string{axolotlTokensNote,
			"deepspeed.zero_optimization.max_reuse_distance: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"deepspeed.zero_optimization.sub_group_size: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-3-8b.json", attn = "flash"), batch = 1, seq = 4096, grad_accum = 8, checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", precision = "bf16-mixed", optimizer = paged_adamw8bit(),
             parallel = parallel(dp = 8, zero = 3, reduce_bucket_size = "auto", stage3_prefetch_bucket_size = "auto", stage3_param_persistence_threshold = "auto", stage3_max_live_parameters = 0))`,
	}})
}

func TestAxolotlErrors(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\n"
	const lora = base + "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nattn_implementation: flash_attention_2\n"
	o := Options{Model: "config.json"}
	runErrorCases(t, []errorCase{
		{name: "a plugin", file: "r.yml", config: lora + "plugins:\n  - axolotl.integrations.kernels.KernelsPlugin\n", opts: o,
			want: "r.yml:10: key plugins: not modelled: plugins (kernels, ...) patch the model and its loss, here axolotl.integrations.kernels.KernelsPlugin (memsh reads Liger's and Cut Cross-Entropy's; SwanLab's logs only)", wantHint: "leave it out"},
		{name: "Cut Cross-Entropy without its plugin", file: "r.yml", config: lora + "cut_cross_entropy: true\n", opts: o,
			want: "r.yml:9: key cut_cross_entropy: Cut Cross-Entropy runs only with Axolotl's CutCrossEntropyPlugin", wantHint: "CutCrossEntropyPlugin to plugins"},
		{name: "Cut Cross-Entropy and Liger's fused loss", file: "r.yml", config: lora + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n" +
			"liger_rope: true\nliger_rms_norm: true\nliger_glu_activation: true\nliger_fused_linear_cross_entropy: true\n", opts: o,
			want: "r.yml:15: key liger_fused_linear_cross_entropy: Liger's fused linear cross-entropy and Cut Cross-Entropy both replace the loss", wantHint: "keep one"},
		{name: "Cut Cross-Entropy on an unknown model", file: "r.yml", config: strings.Replace(lora, "NousResearch/Meta-Llama-3-8B", "acme/unknown-8b", 1) + "plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n", opts: o,
			want: "r.yml:10: key plugins: Cut Cross-Entropy patches the forward of the model types its patch knows: memsh does not know this model's type", wantHint: "--model"},
		{name: "Cut Cross-Entropy on a model its patch lacks", file: "r.yml", config: lora + "plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n",
			opts: Options{Model: "config.json", ModelData: []byte(`{"model_type": "falcon"}`)},
			want: "r.yml:10: key plugins: Cut Cross-Entropy does not patch falcon", wantHint: "patch.py"},
		{name: "Liger without its plugin", file: "r.yml", config: lora + "liger_rms_norm: true\n", opts: o,
			want: "r.yml:9: key liger_rms_norm: Liger's kernels run only with Axolotl's Liger plugin", wantHint: "LigerPlugin to plugins"},
		{name: "Liger with RoPE off", file: "r.yml", opts: Options{Model: "llama.json", ModelData: []byte(`{"model_type": "llama"}`)},
			config: lora + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\nliger_rms_norm: true\nliger_glu_activation: true\nliger_fused_linear_cross_entropy: true\n",
			want:   "r.yml:10: key plugins: Liger with liger_rope off is not modelled", wantHint: "set liger_rope: true"},
		{name: "Liger's plain cross-entropy", file: "r.yml", opts: Options{Model: "llama.json", ModelData: []byte(`{"model_type": "llama"}`)},
			config: lora + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\nliger_cross_entropy: true\n",
			want:   "r.yml:11: key liger_cross_entropy: not modelled", wantHint: "fused linear cross-entropy"},
		{name: "Liger on an unknown model", file: "r.yml", config: strings.Replace(lora, "NousResearch/Meta-Llama-3-8B", "acme/unknown-8b", 1) + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\n", opts: o,
			want: "r.yml:10: key plugins: Liger's kernels are read for Llama, Mistral, Qwen2 and Qwen3: memsh does not know this model's type", wantHint: "--model"},
		{name: "QLoRA under FSDP2", file: "r.yml", config: strings.Replace(lora, "adapter: lora", "adapter: qlora\nload_in_4bit: true", 1) + "fsdp_version: 2\nfsdp_config:\n  offload_params: true\n", opts: o,
			want: "r.yml:10: key fsdp_version: bitsandbytes' 4-bit weights under FSDP2 (fully_shard) are not modelled", wantHint: "fsdp_version: 1"},
		{name: "FSDP's own checkpointing beside gradient_checkpointing", file: "r.yml", config: lora + "gradient_checkpointing: true\nfsdp_config:\n  fsdp_version: 2\n  activation_checkpointing: true\n", opts: o,
			want: "r.yml:12: key fsdp_config.activation_checkpointing: FSDP's activation checkpointing and gradient_checkpointing are both set: the Trainer refuses both", wantHint: "keep one"},
		{name: "size-based wrapping", file: "r.yml", config: lora + "fsdp_config:\n  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n", opts: o,
			want: "r.yml:10: key fsdp_config.fsdp_auto_wrap_policy: policy SIZE_BASED_WRAP is not modelled", wantHint: "TRANSFORMER_BASED_WRAP"},
		{name: "hybrid sharding", file: "r.yml", config: lora + "fsdp:\n  - hybrid_shard\nfsdp_config:\n  fsdp_version: 1\n", opts: o,
			want: "r.yml:10: key fsdp: hybrid_shard is not modelled", wantHint: "full_shard"},
		{name: "FSDP2 kept unsharded after forward", file: "r.yml", config: lora + "fsdp_config:\n  fsdp_version: 2\n  reshard_after_forward: false\n", opts: o,
			want: "r.yml:11: key fsdp_config.reshard_after_forward: parameters kept unsharded between forward and backward are not modelled", wantHint: "by default"},
		{name: "Unsloth", file: "r.yml", config: lora + "unsloth_lora_mlp: true\n", opts: o,
			want: "r.yml:9: key unsloth_lora_mlp: not modelled: Unsloth's kernels", wantHint: "Starlark"},
		{name: "a TrainingArguments key", file: "r.yml", config: lora + "per_device_train_batch_size: 4\n", opts: o,
			want: "r.yml:9: key per_device_train_batch_size: is a TrainingArguments key, which Axolotl does not read", wantHint: "micro_batch_size"},
		{name: "lora on a 4-bit base", file: "r.yml", config: lora + "load_in_4bit: true\n", opts: o,
			want: "r.yml:9: key load_in_4bit: with adapter lora Axolotl loads the weights unquantized, then prepare_model_for_kbit_training upcasts every one to fp32: not modelled", wantHint: "qlora"},
		{name: "qlora without load_in_4bit", file: "r.yml", config: strings.Replace(lora, "adapter: lora", "adapter: qlora", 1), opts: o,
			want: "r.yml:4: key adapter: qlora requires load_in_4bit", wantHint: "load_in_4bit: true"},
		{name: "4 bits without an adapter", file: "r.yml", config: base + "load_in_4bit: true\n", opts: o,
			want: "r.yml:4: key load_in_4bit: a quantized model trains only adapters (no adapter set)", wantHint: "adapter: qlora"},
		{name: "a full fine-tune under sdpa", file: "r.yml", config: base + "sequence_len: 1024\n", opts: o,
			want:     "r.yml: key attn_implementation: a full fine-tune with transformers' default (sdpa) attention keeps embed_tokens, lm_head and the norms in fp32 over bfloat16 weights (loaders/model.py _configure_embedding_dtypes), which memsh's precision does not model",
			wantHint: "flash_attention_2"},
		{name: "no lora_r", file: "r.yml", config: base + "adapter: lora\nlora_alpha: 16\n", opts: o,
			want: "r.yml: key lora_r: missing: Axolotl hands PEFT's LoraConfig None", wantHint: "lora_r: 16"},
		{name: "no LoRA targets", file: "r.yml", config: base + "adapter: lora\nlora_r: 8\nlora_alpha: 16\n", opts: o,
			want: "r.yml:4: key adapter: no LoRA targets (Axolotl hands PEFT an empty target_modules, which it refuses)", wantHint: "lora_target_linear: true"},
		{name: "xformers", file: "r.yml", config: lora + "xformers_attention: true\n", opts: o,
			want: "r.yml:9: key xformers_attention: and attn_implementation are both set", wantHint: "only attn_implementation"},
		{name: "flex attention", file: "r.yml", config: strings.Replace(lora, "flash_attention_2", "flex_attention", 1), opts: o,
			want: "r.yml:8: key attn_implementation: attention flex_attention is not modelled", wantHint: "sdpa"},
		{name: "checkpoints offloaded to disk", file: "r.yml", config: lora + "gradient_checkpointing: offload_disk\n", opts: o,
			want: "r.yml:9: key gradient_checkpointing: offload_disk (checkpoints offloaded to disk) is not modelled", wantHint: "true"},
		{name: "activations offloaded to disk", file: "r.yml", config: lora + "gradient_checkpointing: true\nactivation_offloading: disk\n", opts: o,
			want: "r.yml:10: key activation_offloading: activation offloading disk is not modelled", wantHint: "legacy"},
		{name: "activation offloading without checkpointing", file: "r.yml", config: lora + "activation_offloading: true\n", opts: o,
			want: "r.yml:9: key activation_offloading: activation offloading requires gradient_checkpointing", wantHint: "gradient_checkpointing: true"},
		{name: "one batch key", file: "r.yml", config: "base_model: x\nmicro_batch_size: 2\nadapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n", opts: o,
			want: "r.yml: key micro_batch_size: Axolotl wants at least two of micro_batch_size, gradient_accumulation_steps, batch_size (schemas/validation.py)", wantHint: "gradient_accumulation_steps: 8"},
		{name: "a packed row out of range", file: "r.yml", config: "base_model: x\nmicro_batch_size: 1024\ngradient_accumulation_steps: 1\nsequence_len: 32768\nsample_packing: true\n" +
			"attn_implementation: flash_attention_2\n", opts: o,
			want: "r.yml:4: key sequence_len: a row of 33554432 tokens (micro_batch_size x sequence_len when packed) is out of range (want at most 16777216)", wantHint: "smaller micro_batch_size"},
		{name: "bf16 full", file: "r.yml", config: lora + "bf16: full\n", opts: o,
			want: "r.yml:9: key bf16: want true, false or auto, got full", wantHint: "auto"},
		{name: "a classifier", file: "r.yml", config: lora + "model_type: AutoModelForSequenceClassification\n", opts: o,
			want: "r.yml:9: key model_type: class AutoModelForSequenceClassification is not modelled: memsh replays causal-LM training", wantHint: "ForCausalLM"},
	})
}

// Axolotl's Qwen3-32B QLoRA example runs Apple's cut cross-entropy (a
// plugin), which memsh does not replay: the error names the key and the
// plugin.
func TestAxolotlRefusedExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "axolotl", "qwen3_32b_qlora.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runErrorCases(t, []errorCase{{name: "Qwen3 32B QLoRA with torchao's 4-bit AdamW", file: "qwen3_32b_qlora.yaml", config: string(data),
		opts: Options{Model: "config.json", ModelData: []byte(`{"model_type": "qwen3"}`)},
		want: "qwen3_32b_qlora.yaml:52: key optimizer: optimizer adamw_torch_4bit is not modelled", wantHint: "memsh knows"}})
}

// An Axolotl config is told by base_model with one of its batch, sequence,
// adapter or dataset keys, before LLaMA-Factory's and TrainingArguments'
// importers look at it; base_model alone tells nothing.
func TestAxolotlDetect(t *testing.T) {
	res, err := Import("r.yml", []byte("base_model: meta-llama/Meta-Llama-3-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\nsequence_len: 1024\n"+
		"attn_implementation: flash_attention_2\ndatasets:\n  - path: tatsu-lab/alpaca\n    type: alpaca\n"), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Trainer != "axolotl" || len(res.Unknown) > 0 || !strings.Contains(res.Script, `llama("llama3-8b", attn = "flash")`) {
		t.Errorf("trainer %s, not understood %v, script:\n%s", res.Trainer, res.Unknown, res.Script)
	}
	runErrorCases(t, []errorCase{{name: "Axolotl's keys without base_model", file: "r.yaml", config: "micro_batch_size: 2\nsequence_len: 512\n",
		want: "r.yaml: not a config memsh check knows", wantHint: "--trainer"}})
}

// QLoRA's prepare_model_for_kbit_training leaves in fp32 what Axolotl does
// not cast back: Qwen2's q, k and v biases are listed as not modelled;
// Qwen3 without attention_bias has none.
func TestAxolotlKbitNote(t *testing.T) {
	const cfg = "adapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nmicro_batch_size: 1\n" +
		"gradient_accumulation_steps: 1\nattn_implementation: flash_attention_2\nlora_mlp_kernel: false\nsample_packing: true\n"
	qwen3, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", "qwen3-8b.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		base string
		o    Options
		want []string
	}{
		{"Qwen/Qwen2-7B", Options{}, []string{"adapter: prepare_model_for_kbit_training upcasts to fp32 every weight bitsandbytes does not quantize, " +
			"and Axolotl casts back only the norms, embed_tokens and lm_head: any other (qwen2's biases, routers, convolutions, if it has them) stays fp32, which memsh keeps in the model's dtype"}},
		{"Qwen/Qwen3-8B", Options{Model: "config.json", ModelData: qwen3}, nil},
	} {
		res, err := Import("r.yml", []byte("base_model: "+c.base+"\n"+cfg), defaults(c.o))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.NotModelled, c.want) {
			t.Errorf("%s: not modelled %q, want %q", c.base, res.NotModelled, c.want)
		}
	}
}

// Gemma 4 checkpoints non-reentrant whatever the kwargs say
// (normalize_config, utils/config/__init__.py l.390-399); another model
// reentrant when the kwargs are unset (l.377-383).
func TestAxolotlGemma4Checkpoint(t *testing.T) {
	const cfg = "base_model: google/gemma-4\nmicro_batch_size: 1\ngradient_accumulation_steps: 1\nadapter: lora\nlora_r: 8\nlora_alpha: 16\n" +
		"lora_target_linear: true\nattn_implementation: flash_attention_2\nsample_packing: true\ngradient_checkpointing: true\nlora_mlp_kernel: false\n"
	for kind, want := range map[string]string{
		"gemma4": `checkpoint = checkpoint("full", input_requires_grad = True)`,
		"llama":  `checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True)`,
	} {
		res, err := Import("r.yml", []byte(cfg), defaults(Options{Model: "config.json", ModelData: []byte(`{"model_type": "` + kind + `"}`)}))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Script, want) {
			t.Errorf("%s: want %s in\n%s", kind, want, res.Script)
		}
	}
}

// TestAxolotlCutCrossEntropy: Axolotl's CutCrossEntropyPlugin, its
// cut_cross_entropy on by default (integrations/cut_cross_entropy/args.py),
// is train(loss_chunks = "cce"); beside Liger's RoPE, RMSNorm and SwiGLU
// (its fused loss off) the same loss with liger_kernels; the plugin with
// cut_cross_entropy false leaves transformers' loss.
func TestAxolotlCutCrossEntropy(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nattn_implementation: flash_attention_2\nbf16: true\n"
	const cce = "plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n"
	const both = "plugins:\n  - axolotl.integrations.liger.LigerPlugin\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n" +
		"liger_rope: true\nliger_rms_norm: true\nliger_glu_activation: true\nliger_fused_linear_cross_entropy: false\n"
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"the plugin", base + cce, []string{`loss_chunks = "cce"`}, []string{"liger_kernels"}},
		{"with Liger's kernels", base + both, []string{`loss_chunks = "cce"`, "liger_kernels = True"}, []string{`"liger"`}},
		{"turned off", base + cce + "cut_cross_entropy: false\n", nil, []string{"loss_chunks", "liger_kernels"}},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
}

// TestAxolotlActivationOffloading: activation_offloading true (or the
// deprecated gradient_checkpointing: offload) is TRL's OffloadActivations
// in place of transformers' checkpointing: LoRA offloads every saved
// tensor and recomputes nothing (the embedding's output still requires
// grad: load_adapter's enable_input_require_grads), a full fine-tune checkpoints each layer
// (non-reentrant) and offloads its input; "legacy" runs the copies on the
// compute stream.
func TestAxolotlActivationOffloading(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\n"
	const lora = "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n"
	// Axolotl's load_adapter makes the embedding's output require grad
	// whether or not anything is checkpointed.
	const noCkptInputGrads = `checkpoint = checkpoint("none", input_requires_grad = True)`
	for _, tc := range []struct {
		name, config string
		want, not    []string
	}{
		{"LoRA", base + lora + "gradient_checkpointing: true\nactivation_offloading: true\n",
			[]string{`offload = offload(activations = "cpu")`, noCkptInputGrads}, nil},
		{"LoRA, deprecated spelling", base + lora + "gradient_checkpointing: offload\n",
			[]string{`offload = offload(activations = "cpu")`, noCkptInputGrads}, nil},
		{"legacy", base + lora + "gradient_checkpointing: true\nactivation_offloading: legacy\n",
			[]string{`offload = offload(activations = "cpu", streams = False)`, noCkptInputGrads}, nil},
		{"full fine-tune", base + "gradient_checkpointing: true\nactivation_offloading: true\n",
			[]string{`offload = offload(activations = "cpu")`, `checkpoint = "full",`}, nil},
		{"off", base + lora + "gradient_checkpointing: true\nactivation_offloading: false\n",
			[]string{`checkpoint("full", reentrant = True`}, []string{"offload"}},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, tc.want, tc.not)
	}
}

// TestAxolotlLoRATargets: lora_target_modules as PEFT reads what Axolotl
// hands it (loaders/adapter.py l.171-182): a string alone is a regular
// expression over module paths (lora(target_pattern=)); with
// lora_target_linear it joins the linear names as a name; a name memsh
// has no role for is passed on as a module name.
func TestAxolotlLoRATargets(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\nadapter: lora\nlora_r: 8\nlora_alpha: 16\n"
	for _, tc := range []struct{ name, config, want string }{
		{"a pattern", base + "lora_target_modules: 'model.layers.[\\d]+.(mlp|self_attn).(up|down|gate|q|k|v|o)_proj'\n",
			`target_pattern = "model.layers.[\\d]+.(mlp|self_attn).(up|down|gate|q|k|v|o)_proj"`},
		{"a string beside lora_target_linear", base + "lora_target_linear: true\nlora_target_modules: lm_head\n", `targets = ["all-linear", "lm_head"]`},
		{"a name without a role", base + "lora_target_modules: [q_proj, qkv_proj, w1]\n", `targets = ["q", "qkv_proj", "w1"]`},
		{"parameters", base + "lora_dropout: 0\nlora_target_modules: [q_proj, v_proj]\nlora_target_parameters:\n  - mlp.experts.gate_up_proj\n  - mlp.experts.down_proj\n",
			`lora = lora(rank = 8, alpha = 16, targets = ["q", "v"], dropout = 0.0, target_parameters = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])`},
		{"parameters alone", base + "lora_dropout: 0\nlora_target_parameters: [experts.gate_up_proj]\n",
			`lora = lora(rank = 8, alpha = 16, dropout = 0.0, target_parameters = ["experts.gate_up_proj"])`},
	} {
		checkImportedScript(t, tc.name, tc.config, Options{}, []string{tc.want}, nil)
	}
}

// TestAxolotlFSDPCheckpointing: fsdp_config's activation_checkpointing is
// checkpoint_wrapper(NO_REENTRANT) around each decoder layer before
// fully_shard (monkeypatch/accelerate/fsdp2.py l.587-601): memsh's
// non-reentrant checkpointing of every layer.
func TestAxolotlFSDPCheckpointing(t *testing.T) {
	const cfg = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\nadapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n" +
		"fsdp_version: 2\nfsdp_config:\n  activation_checkpointing: true\n"
	// Axolotl calls enable_input_require_grads for every adapter
	// (loaders/adapter.py l.427-428): the embedding's output requires grad.
	checkImportedScript(t, "FSDP's checkpointing", cfg, Options{GPUs: 8}, []string{`checkpoint = checkpoint("full", input_requires_grad = True),`, "fsdp = 2"}, nil)
}

// checkImportedScript imports config as r.yml and checks that the plan
// script says each of want and none of not.
func checkImportedScript(t *testing.T, name, config string, o Options, want, not []string) {
	t.Helper()
	res, err := Import("r.yml", []byte(config), defaults(o))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(res.Script, w) {
			t.Errorf("%s: want %s in\n%s", name, w, res.Script)
		}
	}
	for _, w := range not {
		if strings.Contains(res.Script, w) {
			t.Errorf("%s: %s in\n%s", name, w, res.Script)
		}
	}
}

// TestAxolotlMultimodalKeys: a multimodal example's keys (Axolotl's
// examples/qwen2-vl/lora-7b.yaml, gemma3/gemma-3-4b-vision-qlora.yml at
// 067b021c8) were listed as not understood: processor_type is a run on
// images memsh does not replay, which the notes say; remove_unused_columns
// and eot_tokens (the dataset's columns, the end-of-turn tokens), like
// LoftQ's initialisation, change nothing replayed.
func TestAxolotlMultimodalKeys(t *testing.T) {
	const cfg = "base_model: Qwen/Qwen3-8B\nadapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nmicro_batch_size: 1\n" +
		"gradient_accumulation_steps: 1\nsequence_len: 1024\nsample_packing: true\nattn_implementation: flash_attention_2\nlora_mlp_kernel: false\n" +
		"lora_qkv_kernel: false\nlora_o_kernel: false\nlora_embedding_kernel: false\n" +
		"processor_type: AutoProcessor\nremove_unused_columns: false\neot_tokens:\n  - <end_of_turn>\npeft:\n  loftq_config:\n    loftq_bits: 4\n"
	res, err := Import("r.yml", []byte(cfg), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown) > 0 {
		t.Errorf("not understood: %q", res.Unknown)
	}
	want := []string{"processor_type: a multimodal run: the images of its dataset and the vision tower's forward on them are not replayed, only the text tokens; " +
		"write them as train(images = (count, height, width)) in the --emit-star plan"}
	if !slices.Equal(res.NotModelled, want) {
		t.Errorf("not modelled %q, want %q", res.NotModelled, want)
	}
}
