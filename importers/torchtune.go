package importers

import (
	"strings"
)

// torchtuneTrainer reads a torchtune recipe config (recipes/configs/*.yaml)
// as torchtune's recipes read it (recipes/full_finetune_*.py,
// lora_finetune_*.py at pytorch/torchtune bd2a0fc): one GPU with --gpus 1,
// else the distributed recipe's FSDP2 over every GPU.
var torchtuneTrainer = &trainer{
	name:  "torchtune",
	about: "a torchtune recipe config (YAML): model component, dtype, batch, max_seq_len, packing, compile, activation checkpointing and offloading, optimizer (in backward), chunked loss, LoRA/QLoRA, QAT (quantizer), FSDP",
	exts:  []string{".yaml", ".yml"},
	parse: parseYAML,
	detect: func(t *tree) bool {
		c, ok := t.leaves["model._component_"]
		s, _ := c.value.(string)
		return ok && strings.HasPrefix(s, "torchtune.")
	},
	plan: torchtunePlan,
	noEffect: []string{
		"output_dir", "tokenizer.*", "dataset.*", "dataset_val.*", "batch_size_val", "run_val_every_n_steps",
		"seed", "shuffle", "checkpointer.*", "resume_from_checkpoint", "save_adapter_weights_only", "save_every_n_steps",
		"enable_async_checkpointing", "epochs", "max_steps_per_epoch", "device", "metric_logger.*",
		"log_every_n_steps", "log_peak_memory_stats", "log_level", "profiler.*", "lr_scheduler.*", "optimizer.lr",
		"optimizer.weight_decay", "optimizer.betas", "optimizer.eps", "optimizer.foreach", "low_cpu_ram",
		"cudnn_deterministic_mode", "collate_fn", "loss.ignore_index",
		"activation_offloading_use_streams",
		"ref_checkpointer.*", "loss.beta", "loss.label_smoothing", "loss.gamma", // the DPO recipes' reference checkpoint and loss weights
	},
}

// torchtuneLoRA maps torchtune's lora_attn_modules to memsh's LoRA roles.
var torchtuneLoRA = map[string]string{"q_proj": "q", "k_proj": "k", "v_proj": "v", "output_proj": "o"}

// torchtuneLayers maps torchtune's module names (custom_sharded_layers)
// to the zoo's, which follow transformers'.
var torchtuneLayers = map[string]string{"tok_embeddings": "embed_tokens", "output": "lm_head"}

func torchtunePlan(t *tree, o Options) (*plan, error) {
	p := &plan{}
	if err := torchtuneModel(t, o, p); err != nil {
		return nil, err
	}
	batch, err := t.integer("batch_size", 0, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if batch == 0 {
		return nil, t.errorf("batch_size", "torchtune's recipes require it: batch_size: 2", "missing")
	}
	p.set("batch", num(batch))
	p.keyOf(t, "batch", "batch_size")
	seq, err := t.integer("tokenizer.max_seq_len", 0, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	packed, err := t.boolean("dataset.packed", false)
	if err != nil {
		return nil, err
	}
	switch {
	case o.Seq > 0: // the command line's --seq: the padded length of the longest batch
		seq = o.Seq
	case seq == 0 && packed:
		return nil, t.errorf("tokenizer.max_seq_len", "packing fills rows of max_seq_len tokens: set it", "is null, and dataset.packed needs it")
	case seq == 0:
		return nil, t.errorf("tokenizer.max_seq_len", "say how long the longest batch is padded to: --seq N (or tokenizer.max_seq_len=N)",
			"is null: batches are padded to their longest sample, which the config does not say")
	}
	p.set("seq", num(seq))
	accum, err := t.integer("gradient_accumulation_steps", 1, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if accum > 1 {
		p.set("grad_accum", num(accum))
	}
	p.keyOf(t, "grad_accum", "gradient_accumulation_steps")
	// training.get_dtype (torchtune/training/precision.py at bd2a0fc, lines
	// 77-101): None, a null dtype, is float32
	dtype, err := t.str("dtype", "fp32")
	if err != nil {
		return nil, err
	}
	switch dtype {
	case "bf16", "fp32":
		p.set("precision", str(dtype))
	default:
		return nil, t.errorf("dtype", "torchtune's recipes train in bf16 or fp32", "unknown dtype %s", quoteKey(dtype))
	}
	if err := torchtuneOptimizer(t, p, accum); err != nil {
		return nil, err
	}
	if err := torchtuneMemory(t, p); err != nil {
		return nil, err
	}
	if err := torchtuneLoss(t, p); err != nil {
		return nil, err
	}
	if err := torchtuneFloat8(t, o, p); err != nil {
		return nil, err
	}
	if err := torchtuneQAT(t, p); err != nil { // torchtune_qat.go
		return nil, err
	}
	torchtuneNotModelled(t)
	p.set("gpu", str(o.GPU))
	return p, torchtuneLayout(t, o, p)
}

// torchtuneModel sets the model (and LoRA, QLoRA) from model._component_.
func torchtuneModel(t *tree, o Options, p *plan) error {
	comp, err := t.str("model._component_", "")
	if err != nil {
		return err
	}
	builder := comp[strings.LastIndex(comp, ".")+1:]
	base, quant := builder, ""
	if b, ok := strings.CutPrefix(builder, "qlora_"); ok {
		base, quant = b, "torchao-nf4"
	} else if b, ok := strings.CutPrefix(builder, "lora_"); ok {
		base = b
	}
	if o.Model != "" {
		p.model = ownLoopHF(o.Model)
	} else if m, ok := torchtuneModels[base]; ok {
		p.model = m.expr(p)
	} else {
		return t.errorf("model._component_", "pass the model's Hugging Face config.json: --model config.json",
			"memsh's zoo has no model for %s", quoteKey(comp))
	}
	if base != builder { // a LoRA builder: its keys are the adapters'
		if err := torchtuneAdapters(t, p); err != nil {
			return err
		}
		// qlora_llama3_1_8b = partial(lora_llama3_1_8b, quantize_base=True)
		// (torchtune/models/llama3_1/_model_builders.py:250 at bd2a0fc): a
		// LoRA builder with quantize_base is QLoRA's NF4 base
		qb, err := t.boolean("model.quantize_base", quant != "")
		if err != nil {
			return err
		}
		if qb {
			quant = "torchao-nf4"
		}
	}
	if quant != "" {
		p.set("quant", str(quant))
	}
	return nil
}

func torchtuneAdapters(t *tree, p *plan) error {
	mods, err := t.strs("model.lora_attn_modules")
	if err != nil {
		return err
	}
	var targets []string
	for _, m := range mods {
		role, ok := torchtuneLoRA[m]
		if !ok {
			return t.errorf("model.lora_attn_modules", "torchtune's are q_proj, k_proj, v_proj and output_proj", "unknown module %s", quoteKey(m))
		}
		targets = append(targets, role)
	}
	if on, err := t.boolean("model.apply_lora_to_mlp", false); err != nil {
		return err
	} else if on {
		targets = append(targets, "gate", "up", "down")
	}
	if on, err := t.boolean("model.apply_lora_to_output", false); err != nil {
		return err
	} else if on {
		targets = append(targets, "lm_head")
	}
	if len(targets) == 0 {
		return t.errorf("model.lora_attn_modules", "list the modules the adapters go on: [q_proj, v_proj]", "a LoRA model with no adapters")
	}
	rank, err := t.integer("model.lora_rank", 0, 1, 1<<16)
	if err != nil {
		return err
	}
	if rank == 0 {
		return t.errorf("model.lora_rank", "torchtune's LoRA builders require it: lora_rank: 8", "missing")
	}
	alpha, _ := t.get("model.lora_alpha")
	alphaExpr := "16"
	switch a := alpha.(type) {
	case int64:
		alphaExpr = num(a)
	case float64:
		alphaExpr = formatFloat(a)
	case nil:
	default:
		return t.errorf("model.lora_alpha", "", "want a number, got %s", describe(alpha))
	}
	drop, err := t.probability("model.lora_dropout", 0)
	if err != nil {
		return err
	}
	dropout := formatFloat(drop)
	t.notModelledIf("model.use_dora", "DoRA's magnitude vectors and the weight norm it computes")
	// torchtune builds the model, adapters included, under
	// set_default_dtype(dtype): its adapters are in the model's dtype, not
	// PEFT's fp32 (lora()'s autocast_adapter_dtype).
	p.set("lora", call("lora", kw("rank", num(rank)), kw("alpha", alphaExpr), kw("targets", strList(targets)), kw("dropout", dropout),
		kw("autocast_adapter_dtype", boolean(false))))
	return nil
}

// torchtuneOptimizerNames maps optimizer components to memsh's builtins.
var torchtuneOptimizerNames = map[string]string{
	"torch.optim.AdamW":                 "adamw",
	"torch.optim.Adam":                  "adam",
	"torch.optim.SGD":                   "sgd",
	"bitsandbytes.optim.AdamW8bit":      "adamw8bit",
	"bitsandbytes.optim.PagedAdamW8bit": "paged_adamw8bit",
	"bitsandbytes.optim.PagedAdamW":     "paged_adamw",
}

func torchtuneOptimizer(t *tree, p *plan, accum int64) error {
	comp, err := t.str("optimizer._component_", "torch.optim.AdamW")
	if err != nil {
		return err
	}
	name, ok := torchtuneOptimizerNames[comp]
	if !ok {
		return t.errorf("optimizer._component_", "memsh knows torch.optim.AdamW, Adam, SGD and bitsandbytes' AdamW8bit, PagedAdamW8bit, PagedAdamW",
			"unknown optimizer %s", quoteKey(comp))
	}
	var args []string
	if name == "adamw" || name == "adam" {
		fused, err := t.boolean("optimizer.fused", false)
		if err != nil {
			return err
		}
		if fused {
			args = append(args, kw("fused", "True"))
		}
		t.notModelledIf("optimizer.amsgrad", "AMSGrad's third state tensor (max_exp_avg_sq)")
	}
	if name == "sgd" {
		if m, _ := t.get("optimizer.momentum"); m != nil {
			f, ok := toFloat(m)
			if !ok || f < 0 {
				return t.errorf("optimizer.momentum", "", "want a number, got %s", describe(m))
			}
			args = append(args, kw("momentum", formatFloat(f)))
		}
	}
	inBwd, err := t.boolean("optimizer_in_bwd", false)
	if err != nil {
		return err
	}
	if inBwd {
		if accum > 1 {
			return t.errorf("optimizer_in_bwd", "torchtune raises the same: set gradient_accumulation_steps: 1", "cannot step in backward with gradient_accumulation_steps %d", accum)
		}
		args = append(args, kw("in_backward", "True"))
	}
	p.set("optimizer", call(name, args...))
	return torchtuneClip(t, p, inBwd)
}

// torchtuneMemory sets checkpointing, offloading and compile.
func torchtuneMemory(t *tree, p *plan) error {
	ac, err := t.boolean("enable_activation_checkpointing", false)
	if err != nil {
		return err
	}
	mode, err := t.str("ac_mode", "")
	if err != nil {
		return err
	}
	switch {
	case mode == "selective":
		every, err := t.integer("ac_option", 0, 1, 1<<20)
		if err != nil {
			return t.errorf("ac_option", "memsh models ac_option k: every k-th layer", "want a layer interval")
		}
		p.set("checkpoint", call("checkpoint", kw("every", num(every))))
	case mode != "" && mode != "full":
		return t.errorf("ac_mode", "torchtune's modes are full and selective", "unknown mode %s", quoteKey(mode))
	case ac:
		p.set("checkpoint", str("full"))
	default:
		t.get("ac_option")
	}
	if mode != "selective" { // true is every layer, false none
		p.keyOf(t, "checkpoint", "enable_activation_checkpointing")
	}
	off, err := t.boolean("enable_activation_offloading", false)
	if err != nil {
		return err
	}
	if off {
		if !ac && mode == "" {
			return t.errorf("enable_activation_offloading", "torchtune raises the same: set enable_activation_checkpointing: True",
				"needs enable_activation_checkpointing")
		}
		p.offload(kw("activations", str("cpu")))
	}
	compiled, err := torchtuneCompile(t)
	if err != nil {
		return err
	}
	if compiled { // torchtune compiles each layer and the loss (training.compile_model, compile_loss)
		p.set("compile", "True")
	}
	if l, ok := t.leaves["compile"]; !ok || l.value == nil || isBool(l.value) { // not the distributed recipes' mapping
		p.keyOf(t, "compile", "compile")
	}
	return nil
}

// torchtuneCompile reads compile as a bool or as the mapping
// full_finetune_distributed.py and qat_distributed.py take (pytorch/torchtune
// bd2a0fc, recipes/full_finetune_distributed.py:343-356: compile.model and
// compile.loss default True, compile.optimizer_step False, compile.scale_grads
// True). The layers are compiled when compile.model is; the other three
// compile steps that hold no activations.
func torchtuneCompile(t *tree) (bool, error) {
	if l, ok := t.leaves["compile"]; ok && l.value != nil {
		return t.boolean("compile", false)
	}
	t.get("compile") // asked (for did-you-mean), and read when null
	under := false
	for _, k := range t.keys() {
		under = under || strings.HasPrefix(k, "compile.")
	}
	if !under {
		return false, nil
	}
	for _, k := range []string{"compile.loss", "compile.optimizer_step", "compile.scale_grads"} {
		if _, err := t.boolean(k, false); err != nil {
			return false, err
		}
	}
	return t.boolean("compile.model", true)
}

// torchtuneNotModelled lists the recipes' settings memsh does not replay.
func torchtuneNotModelled(t *tree) {
	// knowledge_distillation_distributed.py, _single_device.py (bd2a0fc): a
	// frozen teacher model in memory and its logits for kd_loss.
	t.notModelledUnder("teacher_model", "knowledge distillation's frozen teacher model, its forward and its logits")
	t.notModelledUnder("teacher_checkpointer", "the teacher model's checkpoint (with teacher_model)")
	t.notModelledUnder("kd_loss", "knowledge distillation's loss over the student's and teacher's logits")
	t.notModelledIf("kd_ratio", "knowledge distillation's loss weight (with teacher_model)")
	// the vision builders (torchtune/models/llama3_2_vision/_model_builders.py:68-70, and llama4's):
	// which of the encoder, decoder and fusion layers train.
	for _, k := range []string{"model.encoder_trainable", "model.decoder_trainable", "model.fusion_trainable"} {
		t.notModelledUnder(k, "the vision model's frozen or trained parts")
	}
}

// torchtuneFloat8 sets torchao's float8 linears as torchtune's
// convert_to_float8_training makes them (training/quantization.py: every
// linear but the output; fp8_recipe_name unset is tensorwise with
// enable_fsdp_float8_all_gather=True, a recipe name takes torchao's recipe,
// whose tensorwise gathers in bf16).
func torchtuneFloat8(t *tree, o Options, p *plan) error {
	on, err := t.boolean("enable_fp8_training", false)
	if err != nil {
		return err
	}
	recipe, err := t.str("fp8_recipe_name", "")
	if err != nil || !on {
		return err
	}
	tp, err := t.integer("tensor_parallel_dim", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	gpus := o.GPUs * o.Nodes
	if gpus > 1 && tp > 1 {
		t.notModelled = append(t.notModelled, "enable_fp8_training with tensor parallelism (torchao's Float8ColwiseParallel and Float8RowwiseParallel)")
		return nil
	}
	switch recipe {
	case "":
		p.set("float8", str("tensorwise"))
		if gpus > 1 {
			p.set("fsdp_float8_all_gather", "True")
		}
	case "tensorwise", "rowwise":
		p.set("float8", str(recipe))
	case "rowwise_with_gw_hp":
		t.notModelled = append(t.notModelled, "fp8_recipe_name: rowwise_with_gw_hp (its weight gradient GEMM in bf16)")
	default:
		return t.errorf("fp8_recipe_name", "tensorwise, rowwise or rowwise_with_gw_hp", "unknown recipe %s", quoteKey(recipe))
	}
	return nil
}

// torchtuneLoss sets the chunked output of torchtune's chunked losses.
func torchtuneLoss(t *tree, p *plan) error {
	comp, err := t.str("loss._component_", "torchtune.modules.loss.LinearCrossEntropyLoss")
	if err != nil {
		return err
	}
	switch comp {
	case "torchtune.modules.loss.LinearCrossEntropyLoss", "torchtune.modules.loss.CEWithChunkedOutputLoss":
		chunks, err := t.integer("loss.num_output_chunks", 8, 1, 1<<16) // both classes' default
		if err != nil {
			return err
		}
		if chunks > 1 {
			p.set("loss_chunks", num(chunks))
		}
	case "torch.nn.CrossEntropyLoss":
	case torchtuneDPOLoss, torchtuneRSOLoss: // the DPO recipes (lora_dpo_*.py, full_dpo_distributed.py)
		ref := "model" // full_dpo_distributed.py's _ref_model
		if p.has("lora") {
			ref = "adapters" // disable_adapter(self._model)
		}
		p.set("preference", call("dpo", kw("reference", str(ref)), kw("trainer", str("torchtune"))))
	default:
		return t.errorf("loss._component_", "memsh knows LinearCrossEntropyLoss, CEWithChunkedOutputLoss, torch.nn.CrossEntropyLoss and the DPO recipes' DPOLoss and RSOLoss",
			"unknown loss %s", quoteKey(comp))
	}
	return nil
}

// The losses of torchtune's DPO recipes (torchtune/rlhf/loss/dpo.py at
// bd2a0fc): DPOLoss and RSOLoss (its hinge), both scoring the
// reference's log-probabilities (is_reference_free False).
const (
	torchtuneDPOLoss = "torchtune.rlhf.loss.DPOLoss"
	torchtuneRSOLoss = "torchtune.rlhf.loss.RSOLoss"
)

// torchtuneDPO reports whether the config is one of the DPO recipes'.
func torchtuneDPO(t *tree) bool {
	comp, _ := t.str("loss._component_", "")
	return comp == torchtuneDPOLoss || comp == torchtuneRSOLoss
}

// torchtuneLayout is the distributed recipes' layout: FSDP2 over every GPU,
// with torchtune's tensor and context parallel dimensions.
func torchtuneLayout(t *tree, o Options, p *plan) error {
	gpus := o.GPUs * o.Nodes
	tp, err := t.integer("tensor_parallel_dim", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	cp, err := t.integer("context_parallel_dim", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	replicate, err := t.integer("data_parallel_replicate_dim", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	shard, err := t.integer("data_parallel_shard_dim", -1, -1, 1<<20)
	if err != nil {
		return err
	}
	units, err := t.strs("custom_sharded_layers")
	if err != nil {
		return err
	}
	reshard, err := t.boolean("fsdp_reshard_after_forward", true)
	if err != nil {
		return err
	}
	cpuOffload, err := t.boolean("fsdp_cpu_offload", false)
	if err != nil {
		return err
	}
	tpPlan, err := t.str("tensor_parallel_plan._component_", "")
	if err != nil {
		return err
	}
	// recipes/full_finetune_distributed.py:166-168 (bd2a0fc): allgather by
	// default, handed to torch's set_rotate_method (training/_distributed.py:872),
	// as torchtitan does
	rotate, err := t.str("context_parallel_rotate_method", "allgather")
	if err != nil {
		return err
	}
	if rotate != "allgather" && rotate != "alltoall" {
		return t.errorf("context_parallel_rotate_method", "torch's are allgather and alltoall", "unknown rotate method %s", quoteKey(rotate))
	}
	if gpus == 1 {
		return nil // the single-device recipes: the keys above are the distributed recipes'
	}
	if torchtuneDPO(t) { // core's DPO runs on one GPU or DDP/ZeRO-1/2 (preference.go)
		return t.errorf("loss._component_", "--gpus 1 replays the recipe on one GPU",
			"not modelled: the distributed DPO recipes (FSDP2 over the policy, and under full_dpo_distributed.py over the reference copy too)")
	}
	if gpus%(tp*cp*replicate) != 0 {
		return t.errorf("tensor_parallel_dim", "tensor x context x replicate degrees must divide the GPUs",
			"%d GPUs do not divide into tp %d x cp %d x replicate %d", gpus, tp, cp, replicate)
	}
	// ParallelDims._validate (torchtune/training/_distributed.py:72-90 at
	// bd2a0fc): -1 takes the GPUs left over, else the product is the world size
	if shard == 0 || (shard > 0 && shard*replicate*tp*cp != gpus) {
		return t.errorf("data_parallel_shard_dim", "torchtune asserts the same: -1 (the GPUs left over), or replicate x shard x tp x cp = the job's GPUs (--gpus x --nodes)",
			"replicate %d x shard %d x tp %d x cp %d is not the job's %d GPUs", replicate, shard, tp, cp, gpus)
	}
	args := []string{kw("dp", num(gpus/(tp*cp))), kw("fsdp", "True")}
	if tp > 1 {
		tpArgs, err := torchtuneTensorParallel(t, tp, tpPlan)
		if err != nil {
			return err
		}
		args = append(args, tpArgs...)
		// memsh's train() refuses loss_chunks with tensor parallelism: the
		// logits are replayed whole (sharded over the vocabulary), not chunked
		for i, a := range p.train {
			if a.key == "loss_chunks" {
				p.train = append(p.train[:i], p.train[i+1:]...)
				t.notModelled = append(t.notModelled, "loss.num_output_chunks: "+a.expr+" output chunks with tensor parallelism (memsh replays the logits unchunked)")
				break
			}
		}
	}
	if cp > 1 {
		args = append(args, kw("cp", num(cp)))
		if rotate == "allgather" { // torch's _AllGatherRotater: every rank's keys and values at once
			args = append(args, kw("cp_mode", str("allgather")))
		} else {
			t.notModelled = append(t.notModelled, "context_parallel_rotate_method: alltoall (torch's ring: memsh's ring attention, without torch's fp32 merges of the steps' outputs)")
		}
	}
	if replicate > 1 {
		args = append(args, kw("dp_replicate", num(replicate)))
	}
	if !reshard {
		args = append(args, kw("reshard_after_forward", "False"))
	}
	if len(units) > 0 {
		var names []string
		for _, u := range units {
			n, ok := torchtuneLayers[u]
			if !ok {
				return t.errorf("custom_sharded_layers", "memsh knows tok_embeddings and output", "unknown layer %s", quoteKey(u))
			}
			names = append(names, n)
		}
		args = append(args, kw("fsdp_units", strList(names)))
	}
	p.set("parallel", call("parallel", args...))
	if cpuOffload {
		p.offload(kw("params", str("cpu")))
	}
	p.cluster(o)
	return nil
}

// torchtuneTensorParallel is parallel()'s tensor-parallel keywords for
// the distributed recipes' plan (pytorch/torchtune bd2a0fc:
// recipes/full_finetune_distributed.py:156-161 requires a plan, 637-651
// applies it, patched by the loss): base_llama_tp_plan's training plan
// (torchtune/models/llama3/_parallelism.py) runs the norms sequence
// parallel between DTensor's ColwiseParallel and RowwiseParallel
// linears; its output gathers the logits whole (Replicate) unless the
// loss is LinearCrossEntropyLoss, whose patch_tp_plan keeps them sharded
// over the vocabulary (Shard(-1)) under torch's loss_parallel()
// (torchtune/modules/loss/cross_entropy_loss.py:75-85).
func torchtuneTensorParallel(t *tree, tp int64, tpPlan string) ([]string, error) {
	args := []string{kw("tp", num(tp))}
	switch tpPlan {
	case "":
		return nil, t.errorf("tensor_parallel_dim", "torchtune raises the same: tensor_parallel_plan: {_component_: torchtune.models.llama3.base_llama_tp_plan}",
			"tensor parallelism without a tensor_parallel_plan")
	case "torchtune.models.llama3.base_llama_tp_plan":
		args = append(args, kw("sequence_parallel", "True"), kw("tp_runtime", str("torch")))
	default:
		t.notModelled = append(t.notModelled, "tensor_parallel_plan._component_: "+comment(tpPlan)+" (memsh replays megatron-style tensor parallelism without sequence parallelism for it)")
		return args, nil
	}
	loss, err := t.str("loss._component_", "torchtune.modules.loss.LinearCrossEntropyLoss")
	if err != nil {
		return nil, err
	}
	if loss == "torchtune.modules.loss.LinearCrossEntropyLoss" {
		return append(args, kw("loss_parallel", str("torch"))), nil
	}
	t.notModelled = append(t.notModelled, "loss._component_: "+comment(loss)+" with tensor parallelism: the output's logits gathered whole on every rank (memsh keeps them sharded over the vocabulary)")
	return args, nil
}

// isBool says whether v is a bool.
func isBool(v any) bool {
	_, ok := v.(bool)
	return ok
}
