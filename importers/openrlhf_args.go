package importers

import (
	"fmt"
)

// OpenRLHF's arguments (openrlhf/cli/train_sft.py at v0.11.0), read with
// its defaults and written as the keys the hf importer reads.

// openrlhfModel is --model.model_name_or_path (required) as the hf
// importer's model_name_or_path, read from its config.json (--model, or
// where from_pretrained finds it: Options.FindModel): OpenRLHF's loss
// over the logits is hf_config's (loss = "flash_cross_entropy"), which
// the zoo's models do not take. The transformers release is the one
// OpenRLHF 0.11.0 pins (requirements.txt: transformers==5.15.0) unless
// memsh.transformers says.
func openrlhfModel(t *tree, o Options) (Options, error) {
	const key = "model.model_name_or_path"
	name, err := t.str(key, "")
	if err != nil {
		return o, err
	}
	if name == "" {
		return o, &Error{File: t.file, Key: key, Msg: "missing: OpenRLHF's Actor loads it (from_pretrained)", Hint: "--model.model_name_or_path meta-llama/Meta-Llama-3-8B (a Hub id or a folder)"}
	}
	t.derive("model_name_or_path", name, key)
	if o.Model == "" {
		return o, t.errorf(key, modelHint(o)+" (memsh replays OpenRLHF's loss on hf_config's models: its zoo's models score the logits as transformers does)",
			"no config.json found for %s", quoteKey(name))
	}
	t.setDefault("memsh.transformers", "5.15.0")
	attn, err := t.str("ds.attn_implementation", "flash_attention_2")
	if err != nil {
		return o, err
	}
	t.derive("attn_implementation", attn, "ds.attn_implementation")
	dtype, err := t.str("ds.param_dtype", "bf16")
	if err != nil {
		return o, err
	}
	switch dtype {
	case "bf16", "fp16":
		t.derive(dtype, true, "ds.param_dtype")
	default:
		return o, t.errorf("ds.param_dtype", "bf16 or fp16 (argparse's choices)", "unknown dtype %s", quoteKey(dtype))
	}
	if x, err := t.str("ds.experts_implementation", ""); err != nil {
		return o, err
	} else if x != "" && x != "grouped_mm" {
		return o, t.errorf("ds.experts_implementation", "leave it out (transformers then picks grouped_mm, as memsh replays it), or write the plan in Starlark with hf_config(experts = ...)",
			"experts_implementation %s is not read", quoteKey(x))
	}
	return o, nil
}

// openrlhfRefused refuses what OpenRLHF runs that memsh does not replay,
// naming it, and lists what it runs that changes little.
func openrlhfRefused(t *tree) error {
	for _, r := range []struct{ key, why, hint string }{
		{"ds.load_in_4bit", "OpenRLHF's QLoRA casts the norms to fp32 and the LoRA layers to bf16 after get_peft_model (actor.py), which memsh does not replay", "write the plan in Starlark with quant = \"nf4-dq\" and lora(...) (docs/peft.md)"},
		{"ds.use_liger_kernel", "AutoLigerKernelForCausalLM's RMSNorm, SwiGLU and RoPE kernels under OpenRLHF's own loss (the model is called without labels: Liger's fused linear cross-entropy never runs) are not modelled", "leave it out, or write the plan in Starlark with liger_kernels = True"},
		{"ds.deepcompile", "DeepSpeed's DeepCompile (engine.compile()) is not modelled", "leave it out"},
	} {
		if on, err := t.boolean(r.key, false); err != nil {
			return err
		} else if on {
			return t.errorf(r.key, r.hint, "%s", r.why)
		}
	}
	for _, r := range []struct{ key, what, hint string }{
		{"ds.ring_attn_size", "ring attention over %d GPUs (ring_flash_attn)", "leave it out, or write the plan in Starlark with parallel(cp = ...)"},
		{"ds.tensor_parallel_size", "DeepSpeed's AutoTP over %d GPUs", "leave it out, or write the plan in Starlark with parallel(tp = ...)"},
	} {
		if n, err := t.integer(r.key, 1, 1, 1<<16); err != nil {
			return err
		} else if n > 1 {
			return t.errorf(r.key, r.hint, r.what+" is not modelled", n)
		}
	}
	t.get("ds.ring_attn_head_stride") // read with ring attention only
	if opt, err := t.str("optim", "adam"); err != nil {
		return err
	} else if opt != "adam" {
		return t.errorf("optim", "adam (DeepSpeed's AdamW), or write the plan in Starlark", "optimizer %s (DeepSpeed's Muon) is not modelled", quoteKey(opt))
	} else if _, given := t.leaves["optim"]; given {
		// the Trainer's optim, which the hf importer reads, is another
		// setting of the same name: AdamW comes from the DeepSpeed config
		t.derive("optim", "adamw_torch_fused", "optim")
	}
	if c, err := t.integerOrFloat("model.aux_loss_coef"); err != nil {
		return err
	} else if c > 1e-8 {
		t.notModelled = append(t.notModelled, "model.aux_loss_coef: a MoE model's load-balancing loss over the router logits it returns (Actor sets output_router_logits for every model that has it)")
	}
	return nil
}

// openrlhfData is --data.max_len (2048; train_dpo.py's 512), the tokens
// a sample is cut at (SFTDataset, RewardDataset), or --seq.
func openrlhfData(t *tree, o Options, dpo bool) error {
	def := int64(2048)
	if dpo {
		def = 512
	}
	n, err := t.integer("data.max_len", def, 1, 1<<24)
	if err != nil {
		return err
	}
	if o.Seq > 0 {
		n = o.Seq
	}
	t.derive("max_length", n, "data.max_len")
	return nil
}

// openrlhfBatch is --train.micro_batch_size (8) a GPU and the global
// --train.batch_size (128), whose accumulation DeepSpeed works out:
// train_batch_size = micro x accumulation x GPUs, asserted exact
// (get_ds_train_config writes both; strategy.accumulated_gradient).
func openrlhfBatch(t *tree, world int64) (int64, error) {
	micro, err := t.integer("train.micro_batch_size", 8, 1, 1<<24)
	if err != nil {
		return 0, err
	}
	total, err := t.integer("train.batch_size", 128, 1, 1<<40)
	if err != nil {
		return 0, err
	}
	if total%(micro*world) != 0 {
		return 0, t.errorf("train.batch_size", "a multiple of --train.micro_batch_size x GPUs: DeepSpeed asserts train_batch_size = micro batch x accumulation x GPUs",
			"%d does not divide into micro batches of %d on %d GPUs", total, micro, world)
	}
	t.derive("per_device_train_batch_size", micro, "train.micro_batch_size")
	t.derive("gradient_accumulation_steps", total/(micro*world), "train.batch_size")
	return micro, nil
}

// openrlhfPacking is --ds.packing_samples: Actor.forward unpads each
// micro-batch into one row of its samples' tokens (unpad_and_slice_tensor,
// position_ids restarting per sample, no attention mask) under flash
// attention, which train_sft.py sets when another is asked. It returns
// the row's tokens (hfRun.packedRow), micro x max_len at most, 0 unpacked.
func openrlhfPacking(t *tree, o Options, micro int64, dpo bool) (int64, error) {
	packed, err := t.boolean("ds.packing_samples", false)
	if err != nil {
		return 0, err
	}
	seq, _ := t.integer("max_length", 0, 1, 1<<24)
	if packed && dpo { // the pairs' 2 x micro rows unpadded into one: the same tensors when every row is full
		if attn, _ := t.str("attn_implementation", ""); attn != "flash_attention_2" {
			t.derive("attn_implementation", "flash_attention_2", "ds.packing_samples")
		}
		t.notModelled = append(t.notModelled, fmt.Sprintf("ds.packing_samples: a micro-batch's %d chosen and rejected rows in one row of their own tokens, at most %d: memsh replays %d rows of %d (the same tensors when every row is full), attention causal over each", 2*micro, 2*micro*seq, 2*micro, seq))
		return 0, nil
	}
	if !packed {
		if o.Seq == 0 {
			t.notModelled = append(t.notModelled, fmt.Sprintf("data.max_len: unpacked rows are padded to the batch's longest, at most %d tokens: memsh replays rows of %d (--seq N for another length)", seq, seq))
		}
		return 0, nil
	}
	if attn, _ := t.str("attn_implementation", ""); attn != "flash_attention_2" {
		t.derive("attn_implementation", "flash_attention_2", "ds.packing_samples")
	}
	row := micro * seq
	if row > 1<<24 {
		return 0, t.errorf("ds.packing_samples", "a shorter --data.max_len or a smaller --train.micro_batch_size",
			"a row of %d tokens (micro batch x max_len) is out of range (want at most %d)", row, 1<<24)
	}
	t.notModelled = append(t.notModelled, fmt.Sprintf("ds.packing_samples: a micro-batch's %d samples in one row of their own tokens, at most %d: memsh replays %d, attention causal over the whole row (flash's varlen kernel attends within each sample: less time)", micro, row, row))
	return row, nil
}

// openrlhfDPO is train_dpo's step as dpo(trainer = "openrlhf") replays it
// (openrlhf/trainer/dpo_trainer.py: both rows of each pair in one forward,
// flash-attn's cross-entropy over the fp32 logits, the reference a second
// Actor loaded from --ref.model_name_or_path, the model's unless given, as
// a DeepSpeed inference engine: stage 3 partitioned as the policy, else
// whole on each GPU). Its loss's scalars change nothing replayed.
func openrlhfDPO(t *tree) (string, error) {
	name, _ := t.str("model.model_name_or_path", "")
	if ref, err := t.str("ref.model_name_or_path", ""); err != nil {
		return "", err
	} else if ref != "" && ref != name {
		return "", t.errorf("ref.model_name_or_path", "leave it out (the reference is then the model itself), or write the plan in Starlark",
			"a reference other than the model (%s) is not modelled: memsh's reference is a copy of the policy's weights", quoteKey(ref))
	}
	if off, err := t.boolean("ref.offload", false); err != nil {
		return "", err
	} else if off {
		return "", t.errorf("ref.offload", "leave it out, or write the plan in Starlark",
			"the reference's weights offloaded to the CPU (its DeepSpeed config's offload_param) are not modelled")
	}
	for _, k := range []string{"model.beta", "model.ipo_enable", "model.label_smoothing"} {
		t.get(k) // DPOLoss's scalars: the same tensors
	}
	if c, err := t.integerOrFloat("model.nll_loss_coef"); err != nil {
		return "", err
	} else if c > 1e-8 {
		t.notModelled = append(t.notModelled, "model.nll_loss_coef: the NLL term's gradient through the chosen rows' mean log-probabilities ([rows, seq] fp32 tensors beside the sums')")
	}
	return call("dpo", kw("trainer", str("openrlhf"))), nil
}

// openrlhfLoRA is --ds.lora.rank (0: a full fine-tune) with alpha 16,
// dropout 0 and all-linear (target_modules, nargs="*"); Actor calls
// enable_input_require_grads with LoRA. It says whether LoRA runs.
func openrlhfLoRA(t *tree) (bool, error) {
	rank, err := t.integer("ds.lora.rank", 0, 0, 1<<16)
	if err != nil {
		return false, err
	}
	keys := []string{"ds.lora.alpha", "ds.lora.dropout", "ds.lora.target_modules"}
	if rank == 0 {
		for _, k := range keys {
			t.get(k) // no adapters: Actor reads them only with a rank
		}
		return false, nil
	}
	t.derive("use_peft", true, "ds.lora.rank")
	t.derive("lora_r", rank, "ds.lora.rank")
	alpha, err := t.integer("ds.lora.alpha", 16, 1, 1<<20)
	if err != nil {
		return false, err
	}
	t.derive("lora_alpha", alpha, "ds.lora.alpha")
	drop, err := t.probability("ds.lora.dropout", 0)
	if err != nil {
		return false, err
	}
	t.derive("lora_dropout", drop, "ds.lora.dropout")
	targets := []any{"all-linear"}
	switch v, _ := t.get("ds.lora.target_modules"); x := v.(type) {
	case nil:
	case string:
		targets = []any{x}
	case []any:
		targets = x
	default:
		return false, t.errorf("ds.lora.target_modules", "module names: --ds.lora.target_modules q_proj v_proj", "want names, got %s", describe(v))
	}
	t.derive("lora_target_modules", targets, "ds.lora.target_modules")
	return true, nil
}

// openrlhfCheckpoint is --model.gradient_checkpointing_enable (off), with
// use_reentrant --model.gradient_checkpointing_reentrant (off).
func openrlhfCheckpoint(t *tree) {
	on, _ := t.get("model.gradient_checkpointing_enable")
	if on == nil {
		on = false
	}
	t.derive("gradient_checkpointing", on, "model.gradient_checkpointing_enable")
	re, _ := t.get("model.gradient_checkpointing_reentrant")
	if re == nil {
		re = false
	}
	t.derive("gradient_checkpointing_kwargs.use_reentrant", re, "model.gradient_checkpointing_reentrant")
}

// openrlhfNoEffect are OpenRLHF's arguments that change nothing a memory
// replay sees: data and templates, checkpoints, logging, evaluation,
// learning rates and their schedule, seeds (train_sft.py's argparse).
var openrlhfNoEffect = []string{
	"ckpt.*", "logger.*", "eval.*", "data.dataset", "data.dataset_probs", "data.dataset_split", "data.max_samples", "data.multiturn",
	"data.input_key", "data.output_key", "data.input_template", "data.apply_chat_template", "data.tokenizer_chat_template",
	"data.disable_fast_tokenizer", "data.dataloader_num_workers", "data.train_split", "data.prompt_key", "data.chosen_key", "data.rejected_key", "train.seed", "train.full_determinism_enable", "train.max_epochs",
	"local_rank", "adam.*", "muon.*", "lr_scheduler", "lr_warmup_ratio", "min_lr_ratio", "use_ms", "ds.use_universal_ckpt",
	// the SFT loss over every token, prompt included: the same tensors
	"model.pretrain_mode_enable",
	// DeepSpeed launcher's rendezvous, and the variables of the hubs and loggers
	"launcher.master_port", "launcher.master_addr", "launcher.node_rank", "launcher.nnodes_rank", "launcher.no_local_rank",
	"env.MASTER_ADDR", "env.MASTER_PORT", "env.NODE_RANK", "env.WANDB_API_KEY", "env.WANDB_PROJECT", "env.HF_HOME", "env.HF_TOKEN",
	"env.HF_ENDPOINT", "env.NCCL_DEBUG", "env.PYTHONPATH", "env.TOKENIZERS_PARALLELISM", "env.OMP_NUM_THREADS",
}
