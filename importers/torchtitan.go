package importers

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// torchtitanTrainer reads a torchtitan job config (TOML, the
// train_configs/*.toml of each model) as torchtitan's JobConfig reads it:
// pytorch/torchtitan torchtitan/config/job_config.py at 6404b93, whose
// dataclass defaults fill the keys a file leaves out, and the keys of the
// later releases (v0.2.0 at 2025-10-17, v0.2.2 at 2026-02-20): the [compile]
// section, [quantize.linear.float8] for [float8], validation.enable for
// validation.enabled, training.dtype, the memory_budget checkpoint mode and
// expert_tensor_parallel_degree. torchtitan after v0.2.2 has no TOML job
// files (its configs are Python: torchtitan_py.go reads them).
var torchtitanTrainer = &trainer{
	name:  "torchtitan",
	about: "a torchtitan job config (TOML): model flavor, local and global batch, seq_len, mixed precision, optimizer, activation checkpoint mode and per-op option, compile, parallelism degrees (FSDP2/HSDP, TP, PP, CP, EP), CPU offload",
	exts:  []string{".toml"},
	parse: parseTOML,
	detect: func(t *tree) bool {
		_, name := t.leaves["model.name"]
		_, flavor := t.leaves["model.flavor"]
		for k := range t.leaves {
			if strings.HasPrefix(k, "training.") || strings.HasPrefix(k, "parallelism.") {
				return name || flavor
			}
		}
		return false
	},
	plan: torchtitanPlan,
	noEffect: []string{
		"job.*", "profiling.*", "metrics.*", "model.tokenizer_path", "model.hf_assets_path", "model.print_after_conversion",
		"optimizer.lr", "optimizer.beta1", "optimizer.beta2", "optimizer.eps", "optimizer.weight_decay", "lr_scheduler.*",
		"training.dataset", "training.dataset_path", "training.steps", "training.gc_freq", "training.gc_debug",
		"training.seed", "training.deterministic", "checkpoint.*", "comm.*", "memory_estimation.*", "experimental.*",
		"validation.dataset", "validation.dataset_path", "validation.local_batch_size", "validation.seq_len", "validation.freq",
		"validation.steps", "parallelism.pipeline_parallel_schedule_csv",
		"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns", "mx.*",
		"float8.*", "quantize.*", // without their converters; with float8's, torchtitanFloat8 reads them, the others are listed not modelled
		// v0.2.x (torchtitan/config/job_config.py at v0.2.2): data loading, seeds and
		// determinism, checkpointing's RNG state (a few bytes) and its checks
		"training.dataloader.*", "validation.dataloader.*", "debug.seed", "debug.deterministic", "debug.deterministic_warn_only",
		"activation_checkpoint.preserve_rng_state", "activation_checkpoint.determinism_check", "activation_checkpoint.debug",
		"activation_checkpoint.visualize_memory_budget_pareto",
		// forcing the router to balance is memsh's replay: expert_load 1.0 (v0.2.0's name, then v0.2.2's)
		"training.debug_moe_force_load_balance", "debug.moe_force_load_balance",
		// TorchFT's settings, with fault_tolerance.enable read (not modelled) and off by default
		"fault_tolerance.*",
	},
}

// torchtitanModels maps torchtitan's model name and flavor to the zoo.
var torchtitanModels = map[string]zooModel{
	"llama3/8B":   {"llama", "llama3-8b"},
	"llama3/70B":  {"llama", "llama3-70b"},
	"llama3/405B": {"llama", "llama3-405b"},
}

// torchtitanRenamed are keys of torchtitan's earlier JobConfig layouts,
// with the key the version memsh reads has instead.
var torchtitanRenamed = map[string]string{
	"training.data_parallel_shard_degree":          "parallelism.data_parallel_shard_degree",
	"training.data_parallel_replicate_degree":      "parallelism.data_parallel_replicate_degree",
	"training.tensor_parallel_degree":              "parallelism.tensor_parallel_degree",
	"experimental.pipeline_parallel_degree":        "parallelism.pipeline_parallel_degree",
	"experimental.context_parallel_degree":         "parallelism.context_parallel_degree",
	"optimizer.fused":                              "optimizer.implementation",
	"activation_checkpoint.selective_ac_option_op": "activation_checkpoint.selective_ac_option",
}

func torchtitanPlan(t *tree, o Options) (*plan, error) {
	for _, k := range t.keys() {
		if now, ok := torchtitanRenamed[k]; ok {
			return nil, t.errorf(k, "memsh reads torchtitan's JobConfig of torchtitan/config/job_config.py (6404b93): write "+now,
				"a key of an earlier torchtitan version")
		}
	}
	p := &plan{}
	name, err := t.str("model.name", "llama3")
	if err != nil {
		return nil, err
	}
	flavor, err := t.str("model.flavor", "debugmodel")
	if err != nil {
		return nil, err
	}
	if o.Model != "" {
		p.model = ownLoopHF(o.Model)
	} else if m, ok := torchtitanModels[name+"/"+flavor]; ok {
		p.model = m.expr(p)
	} else {
		return nil, t.errorf("model.flavor", "pass the model's Hugging Face config.json: --model config.json",
			"memsh's zoo has no model for %s flavor %s", quoteKey(name), quoteKey(flavor))
	}
	batch, err := torchtitanBatch(t)
	if err != nil {
		return nil, err
	}
	p.set("batch", num(batch))
	if _, old := t.leaves["training.batch_size"]; old {
		p.keyOf(t, "batch", "training.batch_size")
	} else {
		p.keyOf(t, "batch", "training.local_batch_size")
	}
	seq, err := t.integer("training.seq_len", 2048, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if o.Seq > 0 {
		seq = o.Seq
	}
	p.set("seq", num(seq))
	layout, err := torchtitanDegrees(t, o)
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		layout.layers = torchtitanLayers[name+"/"+flavor]
	}
	if err := torchtitanAccum(t, p, batch, layout.dp()); err != nil {
		return nil, err
	}
	param, err := t.str("training.mixed_precision_param", "bfloat16")
	if err != nil {
		return nil, err
	}
	t.get("training.mixed_precision_reduce") // float32, the only choice: FSDP's reduce_dtype, memsh's bf16-mixed
	// v0.2.0's training.dtype (job_config.py at v0.2.2, lines 275-280; train.py:149
	// builds the model under it): bfloat16 is every parameter, gradient and
	// optimizer state in bf16, no fp32 copy; float32 leaves it to mixed precision.
	dtype, err := t.str("training.dtype", "float32")
	if err != nil {
		return nil, err
	}
	if dtype != "float32" && dtype != "bfloat16" {
		return nil, t.errorf("training.dtype", "torchtitan takes bfloat16 or float32", "unknown dtype %s", quoteKey(dtype))
	}
	switch {
	case param != "bfloat16" && param != "float32":
		return nil, t.errorf("training.mixed_precision_param", "torchtitan takes bfloat16 or float32", "unknown dtype %s", quoteKey(param))
	case dtype == "bfloat16":
		p.set("precision", str("bf16"))
	case param == "bfloat16":
		p.set("precision", str("bf16-mixed")) // fully_shard's param_dtype, or torch.autocast on one GPU or under DDP
	default:
		p.set("precision", str("fp32"))
	}
	if err := torchtitanOptimizer(t, p); err != nil {
		return nil, err
	}
	compiledModel, err := torchtitanCompile(t, p)
	if err != nil {
		return nil, err
	}
	if err := torchtitanCheckpoint(t, p, compiledModel); err != nil {
		return nil, err
	}
	if layout.asyncTP, err = torchtitanAsyncTP(t, "parallelism.enable_async_tensor_parallel", compiledModel, layout.tp); err != nil {
		return nil, err
	}
	float8, err := torchtitanNotModelled(t)
	if err != nil {
		return nil, err
	}
	if float8 != "" {
		if err := torchtitanFloat8(t, p, float8, o.GPUs*o.Nodes > 1 && layout.shard*layout.cp > 1, o.GPUs*o.Nodes > 1 && layout.tp > 1); err != nil {
			return nil, err
		}
	}
	p.set("gpu", str(o.GPU))
	return p, layout.apply(t, o, p, batch)
}

// torchtitanAccum is gradient accumulation: global_batch_size over the
// local batch of every data-parallel rank.
func torchtitanAccum(t *tree, p *plan, batch, dp int64) error {
	global, err := t.integer("training.global_batch_size", -1, -1, 1<<40)
	if err != nil {
		return err
	}
	if global <= 0 {
		return nil
	}
	if global%(batch*dp) != 0 {
		return t.errorf("training.global_batch_size", "torchtitan asserts the same: a multiple of local_batch_size x the data-parallel degree",
			"%d is not a multiple of local_batch_size %d x data-parallel degree %d", global, batch, dp)
	}
	if accum := global / (batch * dp); accum > 1 {
		p.set("grad_accum", num(accum))
	}
	return nil
}

// torchtitanOptimizers maps optimizer.name to memsh's builtins.
var torchtitanOptimizers = map[string]string{"AdamW": "adamw", "Adam": "adam"}

func torchtitanOptimizer(t *tree, p *plan) error {
	name, err := t.str("optimizer.name", "AdamW")
	if err != nil {
		return err
	}
	fn, ok := torchtitanOptimizers[name]
	if !ok {
		return t.errorf("optimizer.name", "torchtitan's are AdamW and Adam", "unknown optimizer %s", quoteKey(name))
	}
	args, err := torchtitanImpl(t, false)
	if err != nil {
		return err
	}
	inBwd, err := t.boolean("optimizer.early_step_in_backward", false)
	if err != nil {
		return err
	}
	if inBwd {
		args = append(args, kw("in_backward", "True"))
	}
	p.set("optimizer", call(fn, args...))
	return torchtitanClip(t, p, inBwd)
}

// torchtitanImpl reads optimizer.implementation into the optimizer's
// arguments: fused, foreach or for-loop, and where bf16States (the Python
// configs' OptimizersContainer) fused_opt_states_bf16, fused with its
// moments in bf16, which memsh keeps in fp32 (listed as not modelled).
func torchtitanImpl(t *tree, bf16States bool) ([]string, error) {
	impl, err := t.str("optimizer.implementation", "fused")
	if err != nil {
		return nil, err
	}
	switch {
	case impl == "fused":
		return []string{kw("fused", "True")}, nil
	case impl == "foreach" || impl == "for-loop":
		return nil, nil
	case impl == "fused_opt_states_bf16" && bf16States:
		t.notModelled = append(t.notModelled, "optimizer.implementation: fused_opt_states_bf16 (Adam's moments in bf16; memsh keeps them in fp32)")
		return []string{kw("fused", "True")}, nil
	case bf16States:
		return nil, t.errorf("optimizer.implementation", "fused, foreach, for-loop or fused_opt_states_bf16", "unknown implementation %s", quoteKey(impl))
	}
	return nil, t.errorf("optimizer.implementation", "fused, foreach or for-loop", "unknown implementation %s", quoteKey(impl))
}

// torchtitanCheckpoint is activation checkpointing: none, full, or
// selective per layer (every k-th) or per op, or (v0.2.0) the compiled
// model's memory budget.
func torchtitanCheckpoint(t *tree, p *plan, compiledModel bool) error {
	mode, err := t.str("activation_checkpoint.mode", "selective")
	if err != nil {
		return err
	}
	option, _ := t.get("activation_checkpoint.selective_ac_option")
	whole, err := torchtitanWholeRecompute(t, compiledModel, mode)
	if err != nil {
		return err
	}
	budget, _ := t.get("activation_checkpoint.memory_budget")
	switch mode {
	case "memory_budget":
		// distributed/activation_checkpoint.py at v0.2.2, lines 226-235: asserts
		// the model compiled and sets torch._functorch.config.activation_memory_budget
		// (0.5 by default): memsh's checkpoint(budget = fraction)
		if !compiledModel {
			return t.errorf("activation_checkpoint.mode", "torchtitan asserts the same: set compile.enable = true with \"model\" in compile.components",
				"memory_budget needs the model compiled")
		}
		f := 0.5
		if budget != nil {
			x, ok := toFloat(budget)
			if !ok || x < 0 || x > 1 {
				return t.errorf("activation_checkpoint.memory_budget", "a fraction in [0, 1]: 0 recomputes all, 1 saves all", "want a fraction, got %s", describe(budget))
			}
			f = x
		}
		p.set("checkpoint", call("checkpoint", kw("budget", formatFloat(f))))
	case "none":
	case "full":
		p.set("checkpoint", checkpointNamed(whole, "mode", "full"))
	case "selective":
		s := "2"
		switch x := option.(type) {
		case nil:
		case string:
			s = x
		case int64:
			s = num(x)
		default:
			return t.errorf("activation_checkpoint.selective_ac_option", "'op' or a layer interval, e.g. '2'", "want a string, got %s", describe(option))
		}
		if s == "op" {
			p.set("checkpoint", checkpointNamed(whole, "policy", "op"))
			return nil
		}
		every, err := strconv.ParseInt(s, 10, 64)
		if err != nil || every < 1 || every > 1<<20 {
			return t.errorf("activation_checkpoint.selective_ac_option", "'op' or a layer interval, e.g. '2'", "want op or a positive whole number, got %s", quoteKey(s))
		}
		p.set("checkpoint", call("checkpoint", earlyStopArgs(whole, kw("every", num(every)))...))
	default:
		return t.errorf("activation_checkpoint.mode", "torchtitan's modes are none, selective, full and memory_budget", "unknown mode %s", quoteKey(mode))
	}
	return nil
}

// torchtitanWholeRecompute reports whether the checkpointed blocks'
// recompute runs their whole forward (memsh's checkpoint(early_stop =
// False)): torchtitan passes activation_checkpoint.early_stop, False by
// default, to every checkpoint wrapper since 25413d224 (2025-08-29, in
// v0.2.0: job_config.py and distributed/activation_checkpoint.py at
// v0.2.2); before, torch.utils.checkpoint's own default, the early stop,
// ran. A file that leaves the key out and names a key of 2025-09-30 or
// later (the quantize sections, 8a2686c4a) is of those releases; any
// other is of memsh's base (6404b93) and keeps the early stop. A compiled model's
// partitioner picks what it recomputes, so the flag does not apply there.
func torchtitanWholeRecompute(t *tree, compiledModel bool, mode string) (bool, error) {
	const key = "activation_checkpoint.early_stop"
	if _, set := t.get(key); !set && !compiledModel && (mode == "full" || mode == "selective") {
		for _, k := range t.keys() {
			if strings.HasPrefix(k, "quantize.") {
				return true, nil
			}
		}
		return false, nil
	}
	early, err := t.boolean(key, true)
	if err != nil {
		return false, err
	}
	return !early && !compiledModel, nil
}

// checkpointNamed is train(checkpoint=)'s value for the named mode or
// policy ("full", "op"): the name itself, or checkpoint(key = name,
// early_stop = False) where whole.
func checkpointNamed(whole bool, key, name string) string {
	if !whole {
		return str(name)
	}
	return call("checkpoint", earlyStopArgs(whole, kw(key, str(name)))...)
}

// earlyStopArgs appends early_stop = False to args where whole.
func earlyStopArgs(whole bool, args ...string) []string {
	if whole {
		args = append(args, kw("early_stop", "False"))
	}
	return args
}

// torchtitanNotModelled lists the settings memsh does not replay and
// returns the section of float8's options when model.converters names it:
// float8 (to v0.1.x), quantize.linear.float8 (v0.2.0 on:
// components/quantization/float8.py at v0.2.2, line 238).
func torchtitanNotModelled(t *tree) (float8 string, err error) {
	if v, _ := t.get("model.converters"); v != nil {
		var names []string
		switch x := v.(type) {
		case string:
			names = strings.Split(x, ",")
		case []any:
			for _, e := range x {
				names = append(names, fmt.Sprint(e))
			}
		}
		for _, n := range names {
			switch n = strings.TrimSpace(n); n {
			case "float8", "quantize.linear.float8":
				float8 = n
			case "":
			default:
				t.notModelled = append(t.notModelled, "model.converters: "+comment(n))
			}
		}
	}
	t.notModelledIf("parallelism.enable_compiled_autograd", "compiled autograd (the backward compiled)")
	t.notModelledIf("liger_kernel.enable_fused_linear_cross_entropy", "Liger's fused linear cross entropy (the logits chunked)")
	t.notModelledIf("validation.enabled", "the validation loop's forward passes")
	t.notModelledIf("validation.enable", "the validation loop's forward passes") // v0.2.0's name for validation.enabled
	t.notModelledIf("fault_tolerance.enable", "TorchFT's fault-tolerant replicas")
	if v, _ := t.get("compile.backend"); v != nil && v != "inductor" {
		t.notModelled = append(t.notModelled, "compile.backend: "+comment(fmt.Sprint(v))+" (memsh replays inductor's fused kernels)")
	}
	return float8, nil
}

// torchtitanFloat8 sets torchao's float8 linears as torchtitan's Float8
// converter configures them (components/quantization/float8.py at
// 6404b93): recipe_name unset is tensorwise, with the fp8 all-gather when
// enable_fsdp_float8_all_gather and the data-parallel dimension is
// sharded; a recipe name with the fp8 all-gather is refused, as torchtitan
// asserts. filter_fqns names the linears left in bf16: memsh leaves the
// output head alone (torchtitan's configs list "output"). With tensor
// parallelism (tp) tensorwise runs torchao's Float8ColwiseParallel and
// Float8RowwiseParallel (core/float8_tp.go); the rowwise recipes are not
// modelled there.
func torchtitanFloat8(t *tree, p *plan, section string, sharded, tp bool) error {
	key := func(k string) string { return section + "." + k }
	recipe, err := t.str(key("recipe_name"), "")
	if err != nil {
		return err
	}
	gather, err := t.boolean(key("enable_fsdp_float8_all_gather"), false)
	if err != nil {
		return err
	}
	t.get(key("precompute_float8_dynamic_scale_for_fsdp")) // one all-reduce of the scales: no memory
	if recipe != "" && gather {
		return t.errorf(key("enable_fsdp_float8_all_gather"), "torchtitan asserts the same: drop one of them",
			"enable_fsdp_float8_all_gather with recipe_name %s", quoteKey(recipe))
	}
	if tp && (recipe == "rowwise" || recipe == "rowwise_with_gw_hp") {
		// torchtitan's apply_tp takes Float8ColwiseParallel and
		// Float8RowwiseParallel for tensorwise only; a rowwise recipe
		// gathers in bf16 and casts in the Float8Linear.
		t.notModelled = append(t.notModelled, key("recipe_name")+": "+recipe+" with tensor parallelism (the input gathered in bf16, then cast rowwise)")
		return nil
	}
	switch recipe {
	case "", "tensorwise":
		p.set("float8", str("tensorwise"))
		if gather && sharded {
			p.set("fsdp_float8_all_gather", "True")
		}
	case "rowwise":
		p.set("float8", str("rowwise"))
	case "rowwise_with_gw_hp":
		t.notModelled = append(t.notModelled, key("recipe_name")+": rowwise_with_gw_hp (its weight gradient GEMM in bf16)")
		return nil
	default:
		return t.errorf(key("recipe_name"), "tensorwise, rowwise or rowwise_with_gw_hp", "unknown recipe %s", quoteKey(recipe))
	}
	fqns, err := t.strs(key("filter_fqns"))
	if err != nil {
		return err
	}
	if !slices.Contains(fqns, "output") {
		t.notModelled = append(t.notModelled, key("filter_fqns")+" without output: the output head converted too (memsh keeps it in bf16)")
	}
	if slices.Contains(fqns, "auto_filter_small_kn") { // torchao's _auto_filter_for_recipe
		if tp {
			t.notModelled = append(t.notModelled, key("filter_fqns")+": auto_filter_small_kn with tensor parallelism (memsh converts every linear)")
		} else {
			p.set("float8_auto_filter", "True")
		}
	}
	for _, f := range fqns {
		if f != "output" && f != "auto_filter_small_kn" {
			t.notModelled = append(t.notModelled, key("filter_fqns")+": "+comment(f)+" (memsh converts every linear but the output head)")
		}
	}
	// The per-op policy's save list at 6404b93 has aten.max but no longer
	// aten.abs (88247277c), which memsh's "op" default (9dec370's) keeps:
	// it only matters to float8's casts.
	for i, a := range p.train {
		if a.key == "checkpoint" && a.expr == str("op") {
			p.train[i].expr = call("checkpoint", kw("policy", str("op")), kw("save", strList([]string{"mm", "attention", "reduce_scatter", "max"})))
		}
	}
	t.notModelledIf(key("emulate"), "float8 emulated in high precision (matmuls upcast)")
	t.notModelledIf("float8.moe_fqns_prototype", "float8 rowwise MoE experts") // v0.2.0: the quantize.grouped_mm.float8 converter
	return nil
}

// torchtitanBatch is the per-GPU batch: training.local_batch_size, or
// training.batch_size, its name before torchtitan added global_batch_size.
func torchtitanBatch(t *tree) (int64, error) {
	_, old := t.leaves["training.batch_size"]
	_, now := t.leaves["training.local_batch_size"]
	if old && now {
		return 0, t.errorf("training.batch_size", "keep training.local_batch_size", "and training.local_batch_size both set the per-GPU batch")
	}
	if old {
		return t.integer("training.batch_size", 8, 1, 1<<24)
	}
	return t.integer("training.local_batch_size", 8, 1, 1<<24)
}

// torchtitanCompile is torch.compile: training.compile compiles each
// transformer block (apply_compile); the later [compile] section names
// its components, the model's blocks and the loss.
func torchtitanCompile(t *tree, p *plan) (model bool, err error) {
	blocks, err := t.boolean("training.compile", false)
	if err != nil {
		return false, err
	}
	enable, err := t.boolean("compile.enable", false)
	if err != nil {
		return false, err
	}
	components, err := t.strs("compile.components")
	if err != nil {
		return false, err
	}
	if components == nil {
		components = []string{"model", "loss"}
	}
	for _, c := range components {
		if c != "model" && c != "loss" {
			return false, t.errorf("compile.components", "torchtitan's are model and loss", "unknown component %s", quoteKey(c))
		}
	}
	model, loss := blocks || (enable && slices.Contains(components, "model")), enable && slices.Contains(components, "loss")
	switch {
	case model && loss:
		p.set("compile", "True")
	case model:
		p.set("compile", str("blocks"))
	case loss:
		p.set("compile", str("loss"))
	}
	return model, nil
}

// torchtitanAsyncTP reads parallelism.enable_async_tensor_parallel: with
// tp > 1 torchtitan's maybe_enable_async_tp (distributed/tensor_parallel.py
// at v0.2.2) turns on Inductor's micro-pipeline TP, and raises without the
// model compiled; with tp 1 it is not called. The memory is replayed
// (parallel(async_tp=True)); the overlap of the collectives is not.
// The Python configs' key is compile.enable_async_tensor_parallel.
func torchtitanAsyncTP(t *tree, key string, compiledModel bool, tp int64) (bool, error) {
	on, err := t.boolean(key, false)
	if err != nil || !on || tp <= 1 {
		return false, err
	}
	if !compiledModel {
		return false, t.errorf(key, "torchtitan raises the same: \"Async TP requires 'model' in --compile.components and --compile.enable\"",
			"async TP is an Inductor pass: it needs the model compiled")
	}
	t.notModelled = append(t.notModelled, key+": the collectives' overlap with the matmuls (the step time prices them as without it; the memory is replayed, async_tp=True)")
	return true, nil
}
