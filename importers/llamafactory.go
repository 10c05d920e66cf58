package importers

import (
	"fmt"
	"strings"
)

// llamaFactoryTrainer reads LLaMA-Factory's training YAML (llamafactory-cli
// train): transformers' TrainingArguments plus LLaMA-Factory's
// ModelArguments, DataArguments and FinetuningArguments, with their
// defaults (src/llamafactory/hparams at hiyouga/LLaMA-Factory ff6d4d12e).
// What LLaMA-Factory does with them is written as the keys the hf
// importer reads (tree.derive), and the hf importer reads the rest
// (hfPlanAs with llamaFactoryRun):
//
//   - finetuning_type "lora" (the default) on lora_target "all" (every
//     linear layer but the head: find_all_linear_modules), lora_rank 8,
//     lora_alpha lora_rank x 2, lora_dropout 0; "full" trains every
//     weight;
//   - the trainable weights in fp32 unless pure_bf16 (adapter.py
//     init_adapter: cast_trainable_params_to_fp32): a full fine-tune's
//     weights are fp32 under the Trainer's bf16/fp16 autocast, LoRA's
//     adapters fp32 (get_peft_model's autocast_adapter_dtype); the frozen
//     weights load as the checkpoint's dtype (loader.py: torch_dtype
//     "auto");
//   - quantization_bit 4 or 8 with bitsandbytes (quantization.py:
//     nf4, double_quantization on by default); no
//     prepare_model_for_kbit_training: the norms stay in the checkpoint's
//     dtype unless upcast_layernorm;
//   - gradient checkpointing on unless disable_gradient_checkpointing,
//     reentrant unless use_reentrant_gc is false (checkpointing.py), the
//     checkpointed layer's hidden-states input made to require grad
//     (custom_gradient_checkpointing_func), as TRL's
//     enable_input_require_grads does for LoRA;
//   - rows cut at cutoff_len (2048) tokens, packed by default for stage
//     pt only (parser.py); flash_attn "auto" leaves transformers' default
//     (sdpa), "fa2" flash-attention 2, "sdpa", "disabled" eager
//     (attention.py).
var llamaFactoryTrainer = &trainer{
	name:     "llamafactory",
	about:    "LLaMA-Factory's training YAML (llamafactory-cli train) with the model's config.json: stage sft, pt, dpo or kto, finetuning_type lora or full, lora_rank/lora_alpha/lora_target, quantization_bit, cutoff_len and packing, flash_attn, gradient checkpointing, TrainingArguments' batch, precision, optimizer, DeepSpeed and FSDP",
	exts:     []string{".yaml", ".yml", ".json"},
	parse:    parseHF,
	modelKey: "model_name_or_path",
	detect: func(t *tree) bool {
		for _, k := range llamaFactoryKeys {
			if _, ok := t.leaves[k]; ok {
				return true
			}
		}
		return false
	},
	plan: llamaFactoryPlan,
	noEffect: append([]string{
		"template", "dataset", "dataset_dir", "eval_dataset", "max_samples", "overwrite_cache", "preprocessing_num_workers",
		"plot_loss", "val_size", "tokenized_path", "mix_strategy", "interleave_probs", "streaming", "buffer_size",
		"default_system", "enable_thinking", "trust_remote_code", "resume_from_checkpoint", "adapter_name_or_path",
		"export_dir", "export_size", "infer_backend", "cache_dir", "model_revision", "ddp_timeout", "include_num_input_tokens_seen",
		// LoRA+ gives the adapters' B matrices (and embeddings) their own
		// learning rates: param groups of the same AdamW (trainer_utils.py
		// _create_loraplus_optimizer)
		"loraplus_lr_ratio", "loraplus_lr_embedding",
		// DFT's loss (trainer_utils.py dft_loss_func at ff6d4d12e, the
		// Trainer's compute_loss_func): the model runs without labels, the
		// logits are cast to fp32 and cross_entropy keeps its fp32
		// log_softmax as transformers' loss does; what it adds are
		// per-token vectors (the losses, their no_grad exp, the weighted
		// losses: bytes per token, against the logits' vocab x 4 per token)
		"use_dft_loss",
		// the weights' exponents of EAFT's and ASFT's losses: arithmetic
		"eaft_alpha", "asft_alpha",
	}, hfTrainer.noEffect...),
}

// llamaFactoryKeys tell LLaMA-Factory's files from TrainingArguments'.
var llamaFactoryKeys = []string{"finetuning_type", "lora_target", "cutoff_len", "quantization_bit", "template"}

func llamaFactoryPlan(t *tree, o Options) (*plan, error) {
	if err := llamaFactoryRun(t, o); err != nil {
		return nil, err
	}
	stage, err := t.str("stage", "sft")
	if err != nil {
		return nil, err
	}
	if stage != "sft" && stage != "pt" && stage != "dpo" && stage != "kto" {
		return nil, t.errorf("stage", "memsh replays causal-LM training, DPO and KTO: stage sft, pt, dpo or kto",
			"stage %s is not modelled (a reward or PPO run keeps other models and heads)", quoteKey(stage))
	}
	for _, k := range []string{"use_unsloth", "use_unsloth_gc", "use_galore", "use_apollo", "use_badam", "use_kt", "use_llama_pro",
		"pissa_init", "use_mca", "use_adam_mini", "shift_attn", "neat_packing"} {
		if on, err := t.boolean(k, false); err != nil {
			return nil, err
		} else if on {
			return nil, t.errorf(k, "leave it out, or write the plan in Starlark", "%s is not modelled", k)
		}
	}
	if v, _ := t.get("mixture_of_depths"); v != nil {
		return nil, t.errorf("mixture_of_depths", "leave it out, or write the plan in Starlark", "mixture of depths is not modelled")
	}
	kind, err := t.str("finetuning_type", "lora")
	if err != nil {
		return nil, err
	}
	if kind != "lora" && kind != "full" {
		return nil, t.errorf("finetuning_type", "memsh replays lora and full", "finetuning_type %s is not modelled", quoteKey(kind))
	}
	pure, err := t.boolean("pure_bf16", false)
	if err != nil {
		return nil, err
	}
	if err := llamaFactoryQuant(t, kind); err != nil {
		return nil, err
	}
	upcastNorms, err := t.boolean("upcast_layernorm", false)
	if err != nil {
		return nil, err
	}
	if _, quant := t.leaves["load_in_4bit"]; upcastNorms && !quant {
		if _, quant8 := t.leaves["load_in_8bit"]; !quant8 {
			return nil, t.errorf("upcast_layernorm", "leave it out: the norms then stay in the checkpoint's dtype", "fp32 norms in an unquantized model are not modelled")
		}
	}
	t.notModelledIf("upcast_lmhead_output", "the head's output cast to fp32 by a forward hook (one more [batch, seq, vocab] fp32 tensor)")
	t.notModelledIf("additional_target", "modules trained in full beside the adapters")
	if err := llamaFactoryEAFT(t); err != nil {
		return nil, err
	}
	switch {
	case kind == "full" && pure:
		t.derive("torch_dtype", "bfloat16", "pure_bf16")
	case kind == "full": // cast_trainable_params_to_fp32 (not under ZeRO-3, where they are fp32 already)
		t.derive("torch_dtype", "float32", "finetuning_type")
	default: // from_pretrained(torch_dtype="auto"): the checkpoint's dtype
		t.derive("torch_dtype", "auto", "finetuning_type")
	}
	if err := llamaFactoryLoRA(t, kind); err != nil {
		return nil, err
	}
	if err := llamaFactoryData(t, o, stage); err != nil {
		return nil, err
	}
	if err := llamaFactoryModelArgs(t); err != nil {
		return nil, err
	}
	run := hfRun{kbitNormsFP32: upcastNorms, adaptersInBaseDtype: pure}
	if run.optimizer, err = llamaFactoryMuon(t); err != nil {
		return nil, err
	}
	switch stage {
	case "dpo":
		if run.preference, err = llamaFactoryDPO(t, kind, pure); err != nil {
			return nil, err
		}
	case "kto":
		if run.preference, err = llamaFactoryKTO(t, kind, pure); err != nil {
			return nil, err
		}
	}
	return hfPlanAs(t, o, run)
}

// llamaFactoryQuant is quantization_bit with bitsandbytes: 4-bit nf4 with
// double quantization by default, or 8-bit.
func llamaFactoryQuant(t *tree, kind string) error {
	v, _ := t.get("quantization_bit")
	if v == nil {
		return nil
	}
	method, err := t.str("quantization_method", "bnb")
	if err != nil {
		return err
	}
	if method != "bnb" {
		return t.errorf("quantization_method", "memsh models bitsandbytes: bnb", "quantization method %s is not modelled", quoteKey(method))
	}
	if kind != "lora" {
		return t.errorf("quantization_bit", "LLaMA-Factory asserts it too: use finetuning_type lora", "a quantized model trains only adapters (finetuning_type %s)", quoteKey(kind))
	}
	bits, err := t.integer("quantization_bit", 0, 4, 8)
	if err != nil {
		return err
	}
	switch bits {
	case 4:
		kindQ, err := t.str("quantization_type", "nf4")
		if err != nil {
			return err
		}
		if kindQ != "nf4" {
			return t.errorf("quantization_type", "memsh models nf4", "quant type %s is not modelled", quoteKey(kindQ))
		}
		double, err := t.boolean("double_quantization", true)
		if err != nil {
			return err
		}
		t.derive("load_in_4bit", true, "quantization_bit")
		t.derive("use_bnb_nested_quant", double, "quantization_bit")
	case 8:
		t.derive("load_in_8bit", true, "quantization_bit")
	default:
		return t.errorf("quantization_bit", "4 or 8 with bitsandbytes", "%d bits are not modelled", bits)
	}
	return nil
}

// llamaFactoryLoRA is finetuning_type lora's adapters as PEFT builds them.
func llamaFactoryLoRA(t *tree, kind string) error {
	rank, err := t.integer("lora_rank", 8, 1, 1<<16)
	if err != nil {
		return err
	}
	alpha, err := t.integer("lora_alpha", 2*rank, 1, 1<<20) // None: lora_rank x 2
	if err != nil {
		return err
	}
	dropout, err := t.probability("lora_dropout", 0)
	if err != nil {
		return err
	}
	target, err := t.str("lora_target", "all")
	if err != nil {
		return err
	}
	if kind != "lora" {
		return nil
	}
	var mods []any
	for _, m := range strings.Split(target, ",") {
		m = strings.TrimSpace(m)
		if m == "all" {
			m = "all-linear" // find_all_linear_modules: every linear layer but the head
		}
		if _, ok := hfLoRA[m]; !ok || m == "" {
			return t.errorf("lora_target", "all, or names of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head separated by commas", "unknown module %s", quoteKey(m))
		}
		mods = append(mods, m)
	}
	t.derive("use_peft", true, "finetuning_type")
	t.derive("lora_r", rank, "lora_rank")
	t.derive("lora_alpha", alpha, "lora_alpha")
	t.derive("lora_dropout", dropout, "lora_dropout")
	t.derive("lora_target_modules", mods, "lora_target")
	t.notModelledIf("use_rslora", "rank-stabilised scaling (the same tensors)")
	return nil
}

// llamaFactoryData is cutoff_len and packing.
func llamaFactoryData(t *tree, o Options, stage string) error {
	cutoff, err := t.integer("cutoff_len", 2048, 1, 1<<24)
	if err != nil {
		return err
	}
	packing, err := t.boolean("packing", stage == "pt")
	if err != nil {
		return err
	}
	t.derive("max_length", cutoff, "cutoff_len")
	t.derive("packing", packing, "packing")
	if !packing && o.Seq == 0 {
		t.notModelled = append(t.notModelled, fmt.Sprintf("cutoff_len: unpacked rows are padded to the batch's longest, at most %d tokens: memsh replays rows of %d (--seq N for another length)", cutoff, cutoff))
	}
	return nil
}

// llamaFactoryModelArgs is flash_attn, gradient checkpointing and Liger.
func llamaFactoryModelArgs(t *tree) error {
	attn, err := t.str("flash_attn", "auto")
	if err != nil {
		return err
	}
	impl, ok := map[string]string{"auto": "sdpa", "sdpa": "sdpa", "fa2": "flash_attention_2", "disabled": "eager"}[attn]
	if !ok {
		return t.errorf("flash_attn", "auto, fa2, sdpa or disabled", "attention %s is not modelled", quoteKey(attn))
	}
	t.derive("attn_implementation", impl, "flash_attn")
	off, err := t.boolean("disable_gradient_checkpointing", false)
	if err != nil {
		return err
	}
	reentrant, err := t.boolean("use_reentrant_gc", true)
	if err != nil {
		return err
	}
	t.deriveNot("gradient_checkpointing", !off, "disable_gradient_checkpointing")
	t.derive("gradient_checkpointing_kwargs.use_reentrant", reentrant, "use_reentrant_gc")
	liger, err := t.boolean("enable_liger_kernel", false)
	if err != nil {
		return err
	}
	t.derive("use_liger_kernel", liger, "enable_liger_kernel")
	return nil
}

// llamaFactoryEAFT lists use_eaft_loss as not modelled: EAFT's loss
// (trainer_utils.py eaft_loss_func and _eaft_cross_entropy at ff6d4d12e)
// is DFT's with entropy weights taken under no_grad from
// source[valid_mask], a copy of the fp32 logits' labelled rows ([tokens,
// vocab] fp32), and its top 20; that copy is a local of the loss function
// and lives until it returns: one more fp32 logits at the end of the
// forward, which memsh does not replay. Set with use_dft_loss, DFT's loss
// runs (the trainer's elif) and EAFT's changes nothing. use_asft_loss,
// the last of the chain, is refused when it runs.
func llamaFactoryEAFT(t *tree) error {
	dft, err := t.boolean("use_dft_loss", false)
	if err != nil {
		return err
	}
	eaft, err := t.boolean("use_eaft_loss", false)
	if err != nil {
		return err
	}
	// ASFT's loss (sft/trainer.py compute_loss, trainer_utils.py
	// asft_loss_func) runs a reference model's forward for its logits and
	// a KL over the whole vocabulary: refused, unless DFT's or EAFT's loss
	// runs in its place (the trainer's elif)
	if asft, err := t.boolean("use_asft_loss", false); err != nil {
		return err
	} else if asft && !dft && !eaft {
		return t.errorf("use_asft_loss", "leave it out, or write the plan in Starlark", "ASFT's loss (a reference model's forward and a KL over the vocabulary) is not modelled")
	}
	if !eaft {
		return nil
	}
	if dft {
		t.notModelled = append(t.notModelled, "use_eaft_loss: true beside use_dft_loss, whose loss LLaMA-Factory runs instead (sft/trainer.py): EAFT's changes nothing")
		return nil
	}
	t.notModelled = append(t.notModelled, "use_eaft_loss: EAFT's entropy weights read a no_grad copy of the fp32 logits' labelled rows ([tokens, vocab] fp32), "+
		"live until the loss returns: one more fp32 logits at the end of the forward, not replayed")
	return nil
}
