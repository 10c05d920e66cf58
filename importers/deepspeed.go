package importers

import (
	"fmt"
	"strings"
)

// deepspeedTrainer reads a DeepSpeed config (JSON) as deepspeed.initialize
// reads it (microsoft/DeepSpeed deepspeed/runtime/config.py and
// runtime/zero/config.py's DeepSpeedZeroConfig, whose defaults fill absent
// keys; www.deepspeed.ai/docs/config-json): the batch triple, the ZeRO
// stage and its offloads, fp16/bf16, the optimizer. A DeepSpeed config holds neither the
// model nor the sequence: --model CONFIG.json and --seq N give them, and
// memsh.checkpoint the model's own activation checkpointing.
var deepspeedTrainer = &trainer{
	name:  "deepspeed",
	about: "a DeepSpeed config (JSON) with --model CONFIG.json and --seq N: micro and global batch, gradient accumulation, ZeRO stage and its CPU/NVMe offloads, fp16/bf16, optimizer; memsh.checkpoint for the model's checkpointing",
	exts:  []string{".json"},
	parse: parseJSON,
	detect: func(t *tree) bool {
		for k := range t.leaves {
			if strings.HasPrefix(k, "zero_optimization.") || k == "train_micro_batch_size_per_gpu" || k == "train_batch_size" {
				return true
			}
		}
		return false
	},
	plan: deepspeedPlan,
	noEffect: []string{
		"steps_per_print", "wall_clock_breakdown", "prescale_gradients", "gradient_predivide_factor",
		"optimizer.params.*", "scheduler.*", "fp16.loss_scale", "fp16.loss_scale_window", "fp16.initial_scale_power",
		"fp16.hysteresis", "fp16.min_loss_scale", "fp16.auto_cast", "fp16.consecutive_hysteresis", "zero_allow_untested_optimizer",
		"zero_optimization.stage3_gather_16bit_weights_on_model_save", "zero_optimization.stage3_gather_fp16_weights_on_model_save",
		"zero_optimization.gather_16bit_weights_on_model_save", // the field stage3_... aliases (runtime/zero/config.py)
		"zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory",
		"zero_optimization.offload_optimizer.nvme_path", "zero_optimization.offload_param.nvme_path",
		"zero_optimization.offload_optimizer.fast_init", "zero_optimization.cpu_offload_use_pin_memory",
		"zero_optimization.round_robin_gradients", "zero_optimization.elastic_checkpoint", "zero_optimization.load_from_fp32_weights",
		"activation_checkpointing.contiguous_memory_optimization", "activation_checkpointing.number_checkpoints",
		"activation_checkpointing.synchronize_checkpoint_boundary", "activation_checkpointing.profile",
		"tensorboard.*", "wandb.*", "csv_monitor.*", "comms_logger.*", "flops_profiler.*", "aio.*", "checkpoint.*", "dump_state",
	},
}

// deepspeedOptimizers maps optimizer.type (lower-cased, as DeepSpeed
// compares it) to memsh's: DeepSpeed's Adam is FusedAdam with
// adam_w_mode=True by default, so AdamW; its Lion is FusedLion on the GPU
// and DeepSpeedCPULion offloaded (runtime/engine.py
// _configure_basic_optimizer at edaa722), one momentum buffer a
// parameter as lion() keeps.
var deepspeedOptimizers = map[string]string{"adam": "adamw", "adamw": "adamw", "lion": "lion", "sgd": "sgd"}

// deepspeedBuckets are ZeRO's buffer sizes: they size communication and
// prefetch buffers memsh does not replay at those sizes. DeepSpeedZeroConfig
// takes its fields' own names beside their stage3_ aliases
// (runtime/zero/config.py: max_live_parameters, alias
// "stage3_max_live_parameters"): Axolotl's deepspeed_configs use them.
var deepspeedBuckets = []string{
	"zero_optimization.allgather_bucket_size", "zero_optimization.stage3_max_reuse_distance", "zero_optimization.max_reuse_distance",
	"zero_optimization.sub_group_size", "zero_optimization.allgather_partitions", "zero_optimization.reduce_scatter",
}

// deepspeedSizes are ZeRO's sizes that memsh replays, as parallel() takes
// them (sim/core/zero_sizes.go): each read under DeepSpeedZeroConfig's
// field name or its stage3_ alias (runtime/zero/config.py at edaa722,
// with the misspelled stage3_param_persitance_threshold it still
// accepts), a number of elements or the Hugging Face Trainer's "auto"
// (filled from the model's hidden size); the stage-3 sizes only at stage
// 3, the reduce bucket at stages 1 to 3, where DeepSpeed reads them.
func deepspeedSizes(t *tree, stage int64) ([]string, error) {
	var args []string
	for _, s := range []struct {
		name  string
		keys  []string
		stage int64
	}{
		{"reduce_bucket_size", []string{"reduce_bucket_size"}, 1},
		{"stage3_prefetch_bucket_size", []string{"stage3_prefetch_bucket_size", "prefetch_bucket_size"}, 3},
		{"stage3_param_persistence_threshold", []string{"stage3_param_persistence_threshold", "param_persistence_threshold", "stage3_param_persitance_threshold"}, 3},
		{"stage3_max_live_parameters", []string{"stage3_max_live_parameters", "max_live_parameters"}, 3},
	} {
		for _, k := range s.keys {
			key := "zero_optimization." + k
			v, _ := t.get(key)
			if v == nil {
				continue
			}
			if stage < s.stage {
				break // DeepSpeed does not read it at this stage
			}
			if v == "auto" && s.name == "stage3_max_live_parameters" {
				return nil, t.errorf(key, "a number of elements (DeepSpeed's default is 1e9)", "is auto, which the Hugging Face Trainer does not fill")
			}
			if v == "auto" {
				args = append(args, kw(s.name, str("auto")))
				break
			}
			n, err := t.integer(key, 0, 0, 1<<50)
			if err != nil {
				return nil, err
			}
			if n == 0 && s.name == "reduce_bucket_size" {
				return nil, t.errorf(key, "a positive number of elements, or auto", "0 leaves no room for a gradient")
			}
			args = append(args, kw(s.name, num(n)))
			break
		}
	}
	return args, nil
}

func deepspeedPlan(t *tree, o Options) (*plan, error) {
	p := &plan{}
	if o.Model == "" {
		return nil, &Error{File: t.file, Msg: "a DeepSpeed config holds no model", Hint: "pass the model's Hugging Face config.json: --model config.json"}
	}
	if o.Seq <= 0 {
		return nil, &Error{File: t.file, Msg: "a DeepSpeed config holds no sequence length", Hint: "pass the tokens per sequence: --seq N"}
	}
	p.model = call("hf_config", str(o.Model))
	dp := o.GPUs * o.Nodes
	micro, accum, err := deepspeedBatch(t, dp)
	if err != nil {
		return nil, err
	}
	p.set("batch", num(micro))
	p.set("seq", num(o.Seq))
	if accum > 1 {
		p.set("grad_accum", num(accum))
	}
	for keyword, key := range map[string]string{"batch": "train_micro_batch_size_per_gpu", "grad_accum": "gradient_accumulation_steps"} {
		if _, ok := t.leaves[key]; ok { // the file's: without it DeepSpeed works it out from train_batch_size
			p.keyOf(t, keyword, key)
		}
	}
	if err := deepspeedPrecision(t, p); err != nil {
		return nil, err
	}
	if err := deepspeedOptimizer(t, p); err != nil {
		return nil, err
	}
	if err := deepspeedClip(t, p); err != nil {
		return nil, err
	}
	if err := deepspeedCheckpoint(t, p); err != nil {
		return nil, err
	}
	p.set("gpu", str(o.GPU))
	return p, deepspeedZero(t, o, p)
}

// deepspeedBatch resolves DeepSpeed's batch triple as its config does:
// train_batch_size = micro batch x accumulation x data-parallel ranks,
// any two giving the third.
func deepspeedBatch(t *tree, dp int64) (micro, accum int64, err error) {
	for _, k := range []string{"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"} {
		if v, _ := t.get(k); v == "auto" {
			return 0, 0, t.errorf(k, "the Hugging Face Trainer fills auto from its own arguments: check the TrainingArguments JSON, or give a number", "is auto")
		}
	}
	total, err := t.integer("train_batch_size", 0, 1, 1<<40)
	if err != nil {
		return 0, 0, err
	}
	micro, err = t.integer("train_micro_batch_size_per_gpu", 0, 1, 1<<24)
	if err != nil {
		return 0, 0, err
	}
	accum, err = t.integer("gradient_accumulation_steps", 0, 1, 1<<24)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case total > 0 && micro > 0 && accum > 0:
		if total != micro*accum*dp {
			return 0, 0, t.errorf("train_batch_size", "DeepSpeed asserts the same: train_batch_size = micro batch x gradient_accumulation_steps x GPUs (--gpus x --nodes)",
				"%d is not %d x %d x %d GPUs", total, micro, accum, dp)
		}
	case total > 0 && micro > 0:
		if total%(micro*dp) != 0 {
			return 0, 0, t.errorf("train_batch_size", "a multiple of the micro batch x GPUs (--gpus x --nodes)", "%d does not divide into micro batches of %d on %d GPUs", total, micro, dp)
		}
		accum = total / (micro * dp)
	case total > 0:
		if accum == 0 {
			accum = 1
		}
		if total%(accum*dp) != 0 {
			return 0, 0, t.errorf("train_batch_size", "a multiple of gradient_accumulation_steps x GPUs (--gpus x --nodes)", "%d does not divide by %d steps x %d GPUs", total, accum, dp)
		}
		micro = total / (accum * dp)
	case micro > 0:
		if accum == 0 {
			accum = 1
		}
	default:
		return 0, 0, &Error{File: t.file, Key: "train_micro_batch_size_per_gpu", Msg: "missing: DeepSpeed needs train_batch_size or train_micro_batch_size_per_gpu",
			Hint: "train_micro_batch_size_per_gpu=4 on the command line"}
	}
	return micro, accum, nil
}

// deepspeedPrecision is fp16 (loss-scaled, fp32 master weights in the
// optimizer), bf16 (bf16 params and grads, fp32 master), or fp32; the
// master in 16 bits where the config says so (deepspeedMaster).
func deepspeedPrecision(t *tree, p *plan) error {
	for _, k := range []string{"fp16.enabled", "bf16.enabled", "bfloat16.enabled"} {
		if v, _ := t.get(k); v == "auto" {
			return t.errorf(k, "the Hugging Face Trainer fills auto from its own fp16 and bf16: check the TrainingArguments JSON, or give true or false ("+k+"=true)", "is auto")
		}
	}
	fp16, err := t.boolean("fp16.enabled", false)
	if err != nil {
		return err
	}
	bf16, err := t.boolean("bf16.enabled", false)
	if err != nil {
		return err
	}
	if alias, err := t.boolean("bfloat16.enabled", false); err != nil {
		return err
	} else if alias {
		bf16 = true
	}
	policy, model := "fp32", "fp32" // the precision memsh writes, the dtype DeepSpeed holds the model in
	switch {
	case fp16 && bf16:
		return t.errorf("bf16.enabled", "DeepSpeed refuses both: keep one", "and fp16.enabled are both true")
	case fp16:
		policy, model = "fp16-mixed", "fp16"
	case bf16:
		policy, model = "bf16-mixed", "bf16"
	}
	if err := deepspeedAutocast(t); err != nil {
		return err
	}
	grads, err := deepspeedDataTypes(t, model)
	if err != nil {
		return err
	}
	master, key, err := deepspeedMaster(t, fp16, bf16)
	if err != nil {
		return err
	}
	if stage, _ := t.integer("zero_optimization.stage", 0, 0, 3); grads != "" && stage == 1 && len(master) > 0 {
		// BF16_Optimizer clones an fp32 master whatever the bf16 section says
		t.notModelled = append(t.notModelled, "data_types.grad_accum_dtype: gradients accumulated in fp32 beside the bf16 model and its 16-bit master "+
			"(stage 1's BF16_Optimizer, whose master partition is fp32 whatever the bf16 section says), replayed in the model's dtype")
		grads = ""
	}
	if grads != "" { // grad_accum_dtype: a custom policy of the 16-bit model's dtypes (sim/core/zero_precision.go)
		args := []string{kw("params", str(model)), kw("grads", str(grads))}
		switch {
		case len(master) == 0:
			args = append(args, kw("master", str("fp32"))) // the moments follow it
		case len(master) == 1: // a 16-bit master with DeepSpeed's fp32 moments
			args = append(args, master[0], kw("optimizer_states", str("fp32")))
		default:
			args = append(args, master...)
		}
		if key == "" {
			key = "data_types.grad_accum_dtype"
		}
		p.set("precision", call("precision", args...))
		p.keyOf(t, "precision", key)
		return nil
	}
	if len(master) == 0 {
		p.set("precision", str(policy))
		return nil
	}
	p.set("precision", call("precision", append([]string{str(policy)}, master...)...))
	p.keyOf(t, "precision", key)
	return nil
}

func deepspeedOptimizer(t *tree, p *plan) error {
	kind, err := t.str("optimizer.type", "")
	if err != nil {
		return err
	}
	if kind == "" {
		t.notModelled = append(t.notModelled, "optimizer: absent: the training script builds its own (memsh assumes AdamW; optimizer.type=SGD says otherwise)")
		p.set("optimizer", call("adamw"))
		return nil
	}
	name, ok := deepspeedOptimizers[strings.ToLower(kind)]
	if !ok {
		return t.errorf("optimizer.type", "memsh knows DeepSpeed's Adam, AdamW, Lion and SGD", "optimizer %s is not modelled", quoteKey(kind))
	}
	if name == "adamw" {
		p.set("optimizer", call("adamw", kw("fused", "True"))) // DeepSpeed's FusedAdam (DeepSpeedCPUAdam when offloaded)
		return nil
	}
	p.set("optimizer", call(name))
	return nil
}

// deepspeedCheckpoint is the model's activation checkpointing, which a
// DeepSpeed config does not set (the script does): memsh.checkpoint.
func deepspeedCheckpoint(t *tree, p *plan) error {
	ck, err := t.str("memsh.checkpoint", "none")
	if err != nil {
		return err
	}
	switch ck {
	case "none":
	case "full", "selective", "op":
		p.set("checkpoint", str(ck))
	default:
		return t.errorf("memsh.checkpoint", "none, full, selective or op", "unknown checkpointing %s", quoteKey(ck))
	}
	t.notModelledIf("activation_checkpointing.partition_activations", "DeepSpeed's activation partitioning across model-parallel ranks")
	t.notModelledIf("activation_checkpointing.cpu_checkpointing", "DeepSpeed's checkpoints on the CPU")
	return nil
}

// deepspeedSwapDefaults are ZeRO-Infinity's swap sizes and pipelining
// with DeepSpeed's defaults (runtime/zero/offload_config.py,
// swap_tensor/constants.py at edaa722), which memsh replays
// (sim/replay/offload_nvme.go); another value is not modelled.
var deepspeedSwapDefaults = []struct {
	key string
	def any // float64 or bool
}{
	{"zero_optimization.offload_optimizer.buffer_count", 4.0}, {"zero_optimization.offload_param.buffer_count", 5.0},
	{"zero_optimization.offload_param.buffer_size", 1e8}, {"zero_optimization.offload_param.max_in_cpu", 1e9},
	{"zero_optimization.offload_optimizer.pipeline_read", false}, {"zero_optimization.offload_optimizer.pipeline_write", false},
	{"aio.block_size", 1048576.0},
}

// deepspeedSwapSettings lists the swap settings a config sets to other
// than DeepSpeed's default as not modelled.
func deepspeedSwapSettings(t *tree) {
	for _, k := range deepspeedSwapDefaults {
		v, _ := t.get(k.key)
		switch x := v.(type) {
		case int64:
			v = float64(x)
		case int:
			v = float64(x)
		}
		if v != nil && v != k.def {
			t.notModelled = append(t.notModelled, fmt.Sprintf("%s: ZeRO-Infinity's swap buffers and pipelining (memsh replays DeepSpeed's default, %v)", k.key, k.def))
		}
	}
}

// deepspeedOffloadDevices are offload_optimizer/offload_param devices.
var deepspeedOffloadDevices = map[string]string{"none": "", "cpu": "cpu", "nvme": "nvme"}

// deepspeedZero is the ZeRO stage over every GPU and its offloads.
func deepspeedZero(t *tree, o Options, p *plan) error {
	stage, err := t.integer("zero_optimization.stage", 0, 0, 3)
	if err != nil {
		return err
	}
	// ZeRO++ (runtime/zero/config.py: zero_quantized_weights,
	// zero_quantized_gradients, zero_hpz_partition_size; off by default,
	// as ms-swift's zero3 preset writes them): int8 copies of the weights
	// gathered and of the gradients reduced, and hpZ's secondary shard
	t.notModelledIf("zero_optimization.zero_quantized_weights", "ZeRO++'s weights gathered as int8 (qwZ): its quantized buffers, not replayed")
	t.notModelledIf("zero_optimization.zero_quantized_gradients", "ZeRO++'s gradients reduced as int8 (qgZ): its quantized buffers, not replayed")
	if n, err := t.integer("zero_optimization.zero_hpz_partition_size", 1, 1, 1<<16); err != nil {
		return err
	} else if n > 1 {
		t.notModelled = append(t.notModelled, fmt.Sprintf("zero_optimization.zero_hpz_partition_size: %d: ZeRO++'s secondary copy of the weights sharded within %d GPUs (hpZ), not replayed", n, n))
	}
	device := func(key string) (string, error) {
		d, err := t.str(key, "none")
		if err != nil {
			return "", err
		}
		dev, ok := deepspeedOffloadDevices[d]
		if !ok {
			return "", t.errorf(key, "none, cpu or nvme", "unknown device %s", quoteKey(d))
		}
		return dev, nil
	}
	optDev, err := device("zero_optimization.offload_optimizer.device")
	if err != nil {
		return err
	}
	paramDev, err := device("zero_optimization.offload_param.device")
	if err != nil {
		return err
	}
	// DeepSpeed's deprecated spellings: cpu_offload is offload_optimizer
	// to the CPU, cpu_offload_param (cpu_offload_params before it)
	// offload_param to the CPU.
	for _, legacy := range []struct {
		key string
		dev *string
	}{
		{"zero_optimization.cpu_offload", &optDev}, {"zero_optimization.cpu_offload_param", &paramDev},
		{"zero_optimization.cpu_offload_params", &paramDev},
	} {
		on, err := t.boolean(legacy.key, false)
		if err != nil {
			return err
		}
		if on && *legacy.dev == "" {
			*legacy.dev = "cpu"
		}
	}
	switch {
	case optDev != "" && stage == 0:
		return t.errorf("zero_optimization.stage", "DeepSpeed offloads the optimizer from ZeRO stage 1", "stage 0 cannot offload the optimizer")
	case paramDev != "" && stage < 3:
		return t.errorf("zero_optimization.stage", "DeepSpeed offloads parameters with ZeRO stage 3 only", "stage %d cannot offload parameters", stage)
	}
	// A config's SGD is torch.optim.SGD (runtime/engine.py
	// _configure_basic_optimizer at edaa722: CPU kernels for Adam, AdamW,
	// Adagrad and Lion only), which DeepSpeed then steps over the host
	// partitions; its refusal of another optimizer is for a client's.
	if kind, _ := t.str("optimizer.type", ""); optDev != "" && strings.EqualFold(kind, "sgd") {
		return t.errorf("optimizer.type", "use Adam or AdamW (DeepSpeedCPUAdam), or offload_optimizer.device none",
			"SGD with offload_optimizer is torch.optim.SGD stepping the host partitions, which memsh does not price")
	}
	if optDev == "nvme" && stage < 3 {
		// stage_1_and_2.py sets cpu_offload for any offload_optimizer
		// device but none: the state stays in host memory (edaa722).
		optDev = "cpu"
		t.notModelled = append(t.notModelled, fmt.Sprintf("zero_optimization.offload_optimizer.device: nvme at stage %d, where DeepSpeed keeps the optimizer state in host memory (read as offload(optimizer=\"cpu\"))", stage))
	}
	deepspeedSwapSettings(t)
	sizes, err := deepspeedSizes(t, stage)
	if err != nil {
		return err
	}
	for _, k := range deepspeedBuckets {
		if v, _ := t.get(k); v != nil {
			t.notModelled = append(t.notModelled, fmt.Sprintf("%s: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)", k))
		}
	}
	// DeepSpeedZeroConfig's defaults: overlap_comm on at stage 3,
	// contiguous_gradients on (it shapes stages 2 and 3's gradients).
	oc, err := t.boolean("zero_optimization.overlap_comm", stage == 3)
	if err != nil {
		return err
	}
	if oc && stage == 3 {
		t.notModelled = append(t.notModelled, "zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)")
	}
	if cg, err := t.boolean("zero_optimization.contiguous_gradients", true); err != nil {
		return err
	} else if cg && stage >= 2 {
		t.notModelled = append(t.notModelled, "zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)")
	}
	gpus := o.GPUs * o.Nodes
	if stage > 0 || gpus > 1 {
		args := []string{kw("dp", num(gpus))}
		if stage > 0 {
			args = append(args, kw("zero", num(stage)))
		}
		if oc && (stage == 1 || stage == 2) { // stages 1-2 overlap only when asked (parallel(overlap_comm=True))
			args = append(args, kw("overlap_comm", "True"))
		}
		args = append(args, sizes...)
		p.set("parallel", call("parallel", args...))
	}
	if optDev != "" {
		p.offload(kw("optimizer", str(optDev)))
	}
	if paramDev != "" {
		p.offload(kw("params", str(paramDev)))
	}
	p.cluster(o)
	return nil
}
