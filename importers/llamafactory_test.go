package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// llamaFactoryCutoff is the note for an unpacked run without --seq.
const llamaFactoryCutoff = "cutoff_len: unpacked rows are padded to the batch's longest, at most 2048 tokens: memsh replays rows of 2048 (--seq N for another length)"

// TestLlamaFactory imports LLaMA-Factory's Qwen3 examples
// (testdata/README.md names their commit) with Qwen3-8B's config.json in
// place of Qwen3-4B-Instruct-2507's, and checks each plan against the one
// written by hand from LLaMA-Factory's defaults (llamafactory.go): LoRA
// rank 8 on every linear layer with alpha 16 and no dropout, the frozen
// weights in the checkpoint's bf16, reentrant gradient checkpointing on,
// 2,048-token rows, sdpa; QLoRA's 4-bit nf4 with double quantization and
// its norms left in bf16 (no prepare_model_for_kbit_training); the full
// fine-tune's weights in fp32 under ZeRO-3.
func TestLlamaFactory(t *testing.T) {
	qwen3 := map[string]string{"qwen3-8b.json": "../../sim/testdata/hf/qwen3-8b.json"}
	const lora = `lora = lora(rank = 8, alpha = 16, targets = ["all-linear"], dropout = 0.0)`
	runImportCases(t, []importCase{{
		name:        "Qwen3 LoRA SFT",
		file:        "llamafactory/qwen3_lora_sft.yaml",
		step:        hfStep(1, 8, 1, 2048),
		opts:        Options{Model: "qwen3-8b.json"},
		files:       qwen3,
		notModelled: []string{llamaFactoryCutoff},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), ` + lora + `, batch = 1, seq = 2048, grad_accum = 8,
             precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name:        "Qwen3 QLoRA SFT (bitsandbytes on the fly)",
		file:        "llamafactory/qwen3_lora_sft_otfq.yaml",
		step:        hfStep(1, 8, 1, 2048),
		opts:        Options{Model: "qwen3-8b.json", GPU: "RTX-4090"},
		files:       qwen3,
		notModelled: []string{llamaFactoryCutoff},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), quant = "nf4-dq", ` + lora + `, batch = 1, seq = 2048, grad_accum = 8,
             precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "RTX-4090", clip_grad_norm = 1.0)`,
	}, {
		// upcast_layernorm: the norms in fp32, as prepare_model_for_kbit_training leaves them under TRL
		name:  "Qwen3 QLoRA with its norms upcast, flash-attention 2, 4,096-token packed rows",
		file:  "llamafactory/qwen3_lora_sft_otfq.yaml",
		step:  hfStep(1, 8, 1, 4096),
		opts:  Options{Model: "qwen3-8b.json", Overrides: []string{"upcast_layernorm=true", "flash_attn=fa2", "cutoff_len=4096", "packing=true", "double_quantization=false"}},
		files: qwen3,
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "flash"), quant = "nf4", ` + lora + `, batch = 1, seq = 4096, grad_accum = 8,
             precision = precision(params = "bf16", autocast = True, norms = "fp32"), optimizer = adamw(fused = True),
             checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name: "Qwen3 full SFT under DeepSpeed ZeRO-3 on 8 GPUs",
		file: "llamafactory/qwen3_full_sft.yaml",
		step: hfStep(1, 2, 8, 2048),
		opts: Options{Model: "qwen3-8b.json", GPUs: 8, Overrides: []string{"deepspeed=ds_z3_config.json"}, ReadFile: func(name string) ([]byte, error) {
			return os.ReadFile(filepath.Join("testdata", "llamafactory", name))
		}},
		files: qwen3,
		notModelled: []string{llamaFactoryCutoff,
			"deepspeed.zero_optimization.stage3_max_reuse_distance: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"deepspeed.zero_optimization.sub_group_size: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), batch = 1, seq = 2048, grad_accum = 2, checkpoint = checkpoint("full", reentrant = True),
             clip_grad_norm = 1.0, gpu = "H100-80GB", precision = "bf16-mixed", optimizer = adamw(fused = True),
             parallel = parallel(dp = 8, zero = 3, reduce_bucket_size = "auto", stage3_prefetch_bucket_size = "auto", stage3_param_persistence_threshold = "auto", stage3_max_live_parameters = 1000000000))`,
	}, {
		// stage dpo: a pair is two rows (PairwiseDataCollatorWithPadding), the
		// reference the policy with its adapters disabled
		name:        "Qwen3 LoRA DPO",
		file:        "llamafactory/qwen3_lora_dpo.yaml",
		step:        hfStep(2, 8, 1, 2048),
		opts:        Options{Model: "qwen3-8b.json"},
		files:       qwen3,
		notModelled: []string{llamaFactoryCutoff},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), ` + lora + `, batch = 1, seq = 2048, grad_accum = 8,
             precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB",
             preference = dpo(reference = "adapters", trainer = "llamafactory"), clip_grad_norm = 1.0)`,
	}, {
		// stage kto: unpaired rows (KTODataCollatorWithPadding), the KL
		// forwards, the reference the policy with its adapters disabled
		name:        "Qwen3 LoRA KTO",
		file:        "llamafactory/qwen3_lora_kto.yaml",
		step:        hfStep(1, 8, 1, 2048),
		opts:        Options{Model: "qwen3-8b.json"},
		files:       qwen3,
		notModelled: []string{llamaFactoryCutoff},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), ` + lora + `, batch = 1, seq = 2048, grad_accum = 8,
             precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB",
             preference = kto(reference = "adapters", trainer = "llamafactory"), clip_grad_norm = 1.0)`,
	}, {
		name:        "Qwen3 LoRA ORPO: no reference",
		file:        "llamafactory/qwen3_lora_dpo.yaml",
		step:        hfStep(2, 8, 1, 2048),
		opts:        Options{Model: "qwen3-8b.json", Overrides: []string{"pref_loss=orpo"}},
		files:       qwen3,
		notModelled: []string{llamaFactoryCutoff},
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), ` + lora + `, batch = 1, seq = 2048, grad_accum = 8,
             precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True, input_requires_grad = True), gpu = "H100-80GB",
             preference = dpo(reference = "none", trainer = "llamafactory"), clip_grad_norm = 1.0)`,
	}, {
		name:  "Qwen3 full SFT on one GPU: fp32 weights under bf16 autocast, checkpointing off",
		file:  "llamafactory/qwen3_full_sft.yaml",
		step:  hfStep(1, 2, 1, 1024),
		opts:  Options{Model: "qwen3-8b.json", Seq: 1024, Overrides: []string{"deepspeed=null", "disable_gradient_checkpointing=true"}},
		files: qwen3,
		hand: `plan = train(hf_config("qwen3-8b.json", attn = "sdpa"), batch = 1, seq = 1024, grad_accum = 2,
             precision = "bf16-mixed", optimizer = adamw(fused = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}})
}

func TestLlamaFactoryErrors(t *testing.T) {
	const base = "model_name_or_path: meta-llama/Meta-Llama-3-8B\nfinetuning_type: lora\n"
	runErrorCases(t, []errorCase{
		{name: "PPO", file: "r.yaml", config: base + "stage: ppo\n",
			want: "r.yaml:3: key stage: stage ppo is not modelled (a reward or PPO run keeps other models and heads)", wantHint: "sft, pt, dpo or kto"},
		{name: "full KTO with fp32 weights", file: "r.yaml", config: "model_name_or_path: x\nfinetuning_type: full\nstage: kto\nbf16: true\n",
			want: "r.yaml:2: key finetuning_type: a full KTO run trains fp32 weights beside a reference copy in the compute dtype: not modelled (memsh's copy is in the policy's dtype)", wantHint: "pure_bf16"},
		{name: "KTO against another checkpoint", file: "r.yaml", config: base + "stage: kto\nref_model: meta-llama/Meta-Llama-3-8B-Instruct\n",
			want: "r.yaml:4: key ref_model: a reference model from another checkpoint is not modelled", wantHint: "leave it out"},
		{name: "DPO against another checkpoint", file: "r.yaml", config: base + "stage: dpo\nref_model: meta-llama/Meta-Llama-3-8B-Instruct\n",
			want: "r.yaml:4: key ref_model: a reference model from another checkpoint is not modelled", wantHint: "adapters disabled"},
		{name: "full DPO with fp32 weights", file: "r.yaml", config: "model_name_or_path: x\nfinetuning_type: full\nstage: dpo\nbf16: true\n",
			want: "r.yaml:2: key finetuning_type: a full DPO run trains fp32 weights beside a reference copy in the compute dtype: not modelled (memsh's copy is in the policy's dtype)", wantHint: "pure_bf16"},
		{name: "an unknown preference loss", file: "r.yaml", config: base + "stage: dpo\npref_loss: bco\n",
			want: "r.yaml:4: key pref_loss: unknown loss bco", wantHint: "sigmoid, hinge"},
		{name: "freeze tuning", file: "r.yaml", config: "model_name_or_path: x\nfinetuning_type: freeze\n",
			want: "r.yaml:2: key finetuning_type: finetuning_type freeze is not modelled", wantHint: "lora and full"},
		{name: "a quantized full fine-tune", file: "r.yaml", config: "model_name_or_path: x\nfinetuning_type: full\nquantization_bit: 4\n",
			want: "r.yaml:3: key quantization_bit: a quantized model trains only adapters (finetuning_type full)", wantHint: "finetuning_type lora"},
		{name: "3-bit HQQ", file: "r.yaml", config: base + "quantization_bit: 3\nquantization_method: hqq\n",
			want: "r.yaml:4: key quantization_method: quantization method hqq is not modelled", wantHint: "bnb"},
		{name: "an unknown LoRA target", file: "r.yaml", config: base + "lora_target: q_proj,wqkv\n",
			want: "r.yaml:3: key lora_target: unknown module wqkv", wantHint: "separated by commas"},
		{name: "FlashAttention-3", file: "r.yaml", config: base + "flash_attn: fa3\n",
			want: "r.yaml:3: key flash_attn: attention fa3 is not modelled", wantHint: "fa2"},
		{name: "unsloth", file: "r.yaml", config: base + "use_unsloth: true\n",
			want: "r.yaml:3: key use_unsloth: use_unsloth is not modelled", wantHint: "Starlark"},
		{name: "no model", file: "r.yaml", config: "finetuning_type: lora\ncutoff_len: 512\n",
			want: "r.yaml: key model_name_or_path: the config names no model (LLaMA-Factory raises \"Please provide `model_name_or_path`.\")", wantHint: "model_name_or_path: Qwen/Qwen3-8B"},
		{name: "a v1 config (USE_V1=1)", file: "r.yaml", config: "model: Qwen/Qwen3-0.6B\nmodel_class: llm\ndist_config:\n  name: fsdp2\nmicro_batch_size: 1\ncutoff_len: 2048\n",
			want: "r.yaml:1: key model: a LLaMA-Factory v1 config (USE_V1=1: model, model_class, dist_config, peft_config, ...), which memsh check does not read: " +
				"v1 trains with its own trainer (src/llamafactory/v1/core/base_trainer.py), its kernels (kernel_config), loss and batching, not transformers' Trainer, whose reading the v0 YAML has",
			wantHint: `train(hf_config("Qwen/Qwen3-0.6B/config.json"), batch = 1, seq = 2048, checkpoint = "full", parallel = parallel(dp = GPUS, fsdp = 2))`},
		{name: "ASFT's loss", file: "r.yaml", config: base + "use_asft_loss: true\nasft_alpha: 0.1\n",
			want: "r.yaml:3: key use_asft_loss: ASFT's loss (a reference model's forward and a KL over the vocabulary) is not modelled", wantHint: "Starlark"},
		{name: "a prediction run", file: "r.yaml", config: base + "do_predict: true\npredict_with_generate: true\n",
			want: "r.yaml:3: key do_predict: a prediction run without do_train: LLaMA-Factory trains nothing (workflow.py: trainer.train() only with do_train)", wantHint: "do_train: true"},
		{name: "an evaluation run", file: "r.yaml", config: base + "do_train: false\ndo_eval: true\n",
			want: "r.yaml:4: key do_eval: an evaluation run without do_train: LLaMA-Factory trains nothing (workflow.py: trainer.train() only with do_train)", wantHint: "do_train: true"},
		{name: "FP8 through accelerate", file: "r.yaml", config: base + "fp8: true\nfp8_backend: torchao\n",
			want: "r.yaml:3: key fp8: FP8 training (accelerate's torchao rowwise Float8Linear or Transformer Engine) is not modelled", wantHint: "float8"},
		{name: "fp8's FSDP all-gather turns fp8 on", file: "r.yaml", config: base + "fp8_enable_fsdp_float8_all_gather: true\n",
			want: "r.yaml:3: key fp8_enable_fsdp_float8_all_gather: FP8 training (accelerate's torchao rowwise Float8Linear or Transformer Engine) is not modelled", wantHint: "float8"},
		{name: "fp32 norms without quantization", file: "r.yaml", config: base + "upcast_layernorm: true\ncutoff_len: 16\n",
			want: "r.yaml:3: key upcast_layernorm: fp32 norms in an unquantized model are not modelled", wantHint: "checkpoint's dtype"},
	})
}

// A LLaMA-Factory YAML holds TrainingArguments' per_device_train_batch_size
// too: detection tries LLaMA-Factory first, so its own keys are read (the
// LoRA below), not left over as the hf importer's.
func TestLlamaFactoryBeforeHF(t *testing.T) {
	res, err := Import("r.yaml", []byte("model_name_or_path: meta-llama/Meta-Llama-3-8B\nper_device_train_batch_size: 2\ncutoff_len: 512\n"), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Trainer != "llamafactory" || len(res.Unknown) > 0 || !strings.Contains(res.Script, `lora = lora(rank = 8, alpha = 16, targets = ["all-linear"]`) {
		t.Errorf("trainer %s, not understood %v, script:\n%s", res.Trainer, res.Unknown, res.Script)
	}
	// LoRA+'s learning rates change nothing replayed (examples/extras/loraplus)
	res, err = Import("r.yaml", []byte("model_name_or_path: meta-llama/Meta-Llama-3-8B\nper_device_train_batch_size: 2\ncutoff_len: 512\nloraplus_lr_ratio: 16.0\n"), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown) > 0 || len(res.NotModelled) > 1 {
		t.Errorf("trainer %s, not understood %v, script:\n%s", res.Trainer, res.Unknown, res.Script)
	}
}
