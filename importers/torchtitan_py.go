package importers

import (
	"fmt"
	"path"
	"strings"

	"go.starlark.net/syntax"
)

// torchtitanPyTrainer reads torchtitan's Python configs (torchtitan after
// v0.2.2: a run is --module M --config F, F a function of M returning
// Trainer.Config; torchtitan/config/README.md at b5bcd76c6), the
// function named by Options.Function evaluated as torchtitan_py_eval.go
// says. The config's fields become dotted keys (training.max_context_length,
// parallelism.tensor_parallel_degree, activation_checkpoint for the
// policy's class), which key=value overrides set as torchtitan's frozen
// --section.option flags do.
var torchtitanPyTrainer = &trainer{
	name:      "torchtitan",
	about:     "a torchtitan Python config (config_registry.py or a torchtitan_recipes module, --config FUNCTION): model_registry flavor, tokens per micro-batch and context length, tokens per step, mixed precision, AdamW, activation checkpointing policy, compile, parallelism degrees, CPU offload, Float8 converter",
	exts:      []string{".py"},
	parseOpts: parsePyConfig,
	detect:    func(*tree) bool { return true },
	plan:      torchtitanPyPlan,
	noEffect: []string{
		"hf_assets_path", "dump_folder", "profiler.*", "metrics.*", "tokenizer.*", "dataloader.*", "lr_scheduler.*", "checkpoint.*",
		"comm.*", "override.*", "training.steps", "training.gc_freq", "training.gc_debug",
		"training.mixed_precision_reduce", // float32, the only choice: FSDP's reduce_dtype, memsh's bf16-mixed
		"debug.seed", "debug.deterministic", "debug.deterministic_warn_only", "debug.moe_force_load_balance", "debug.detect_anomaly",
		"debug.print_config", "debug.save_config_file", "debug.enable_structured_logging", "debug.spmd_typechecking",
		"activation_checkpoint.preserve_rng_state", "activation_checkpoint.determinism_check", "activation_checkpoint.debug",
		"activation_checkpoint.visualize_memory_budget_pareto",
		"validator.*", // with validator.enable read (not modelled)
		"parallelism.pipeline_parallel_schedule_csv", "parallelism.context_parallel_ptrr_mask_key",
		// the SPMD backend: DTensor on the model-parallel axes or spmd_types'
		// local tensors, the same shards and collectives (configs.py)
		"parallelism.spmd_backend",
		"model_spec.name", "model_spec.model", "loss.global_vocab_size", "loss.loss_fn.global_vocab_size", // the vocabulary the model has
	},
}

// parsePyConfig evaluates o.Function of a Python config module into a
// tree of its fields.
func parsePyConfig(file string, data []byte, o Options) (*tree, error) {
	src := string(data)
	rewritten, imports, err := pyRewrite(src)
	if err != nil {
		if se, ok := err.(*syntax.Error); ok {
			return nil, &Error{File: file, Line: int(se.Pos.Line), Msg: se.Msg, Hint: pySubsetHint}
		}
		if e, ok := err.(*Error); ok && e.File == "" {
			e.File = file
		}
		return nil, err
	}
	f, err := pyParse(file, src, rewritten)
	if err != nil {
		return nil, err
	}
	where := file
	if o.Path != "" {
		where = o.Path
	}
	e := &pyEval{file: file, pkg: pyPackage(where), funcs: map[string]*syntax.DefStmt{}, imports: map[string]pyImport{}, globals: map[string]any{}}
	for _, im := range imports {
		e.imports[im.local] = im
	}
	var assigns []*syntax.AssignStmt
	for _, s := range f.Stmts {
		switch s := s.(type) {
		case *syntax.DefStmt:
			e.funcs[s.Name.Name] = s
		case *syntax.AssignStmt:
			assigns = append(assigns, s)
		case *syntax.ExprStmt, *syntax.BranchStmt: // the docstring; the imports' pass
		case *syntax.IfStmt: // if __name__ == "__main__": not run on import
		default:
			return nil, e.errAt(pyStart(s), "a top-level %s", pyKind(s))
		}
	}
	env := &pyEnv{vars: e.globals}
	for _, s := range assigns {
		if err := e.assign(env, s); err != nil {
			return nil, err
		}
	}
	if o.Function == "" {
		return nil, &Error{File: "command line", Msg: fmt.Sprintf("%s is a Python module: say which function returns the config with --config NAME", path.Base(file)),
			Hint: "its functions: " + e.funcNames()}
	}
	def, ok := e.funcs[o.Function]
	if !ok {
		return nil, &Error{File: "command line", Msg: fmt.Sprintf("--config %s: %s defines no such function", o.Function, path.Base(file)),
			Hint: "its functions: " + e.funcNames()}
	}
	v, err := e.call(def.Def, def, nil, map[string]any{})
	if err != nil {
		return nil, err
	}
	cfg, ok := v.(*pyObj)
	if !ok || cfg.class != "Trainer.Config" {
		return nil, &Error{File: file, Line: int(def.Def.Line), Msg: fmt.Sprintf("%s() returns %s, not a Trainer.Config", o.Function, describe(v)), Hint: pySubsetHint}
	}
	t := newTree(file)
	if err := pyFlatten(t, cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// pyPackage is the package of a file under torchtitan/models/<model>/
// (a config_registry.py), where from . import model_registry finds the
// model's registry; "" elsewhere.
func pyPackage(file string) string {
	dir := path.Dir(strings.ReplaceAll(file, "\\", "/"))
	parent, model := path.Split(dir)
	if path.Base(strings.TrimSuffix(parent, "/")) == "models" && model != "" {
		return "torchtitan.models." + model
	}
	return ""
}

// torchtitanPyPlan is the plan of a Python config's fields, mapped as the
// TOML job files' are (torchtitanPlan) where the two generations share a
// setting.
func torchtitanPyPlan(t *tree, o Options) (*plan, error) {
	p := &plan{}
	t.get("model_spec") // its class, ModelSpec: model_registry's
	name, err := t.str("model_spec.name", "")
	if err != nil {
		return nil, err
	}
	flavor, err := t.str("model_spec.flavor", "")
	if err != nil {
		return nil, err
	}
	if name == "" && o.Model == "" {
		return nil, t.errorf("model_spec", "build it with the model's model_registry(flavor), or pass --model config.json", "the config sets no model_spec")
	}
	key := name + "/" + flavor
	if o.Model != "" {
		p.model = ownLoopHF(o.Model)
	} else if m, ok := torchtitanModels[key]; ok {
		p.model = m.expr(p)
	} else {
		return nil, t.errorf("model_spec.flavor", "memsh's zoo has torchtitan's llama3 8B, 70B and 405B; pass the model's Hugging Face config.json: --model config.json",
			"memsh's zoo has no model for %s flavor %s", quoteKey(name), quoteKey(flavor))
	}
	if p.model, err = torchtitanPyModelOptions(t, p.model, o.Model != ""); err != nil {
		return nil, err
	}
	if err := torchtitanPyTPGemm(t); err != nil {
		return nil, err
	}
	if err := torchtitanPyMoEOptions(t); err != nil {
		return nil, err
	}
	seq, err := t.integer("training.max_context_length", 2048, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	if o.Seq > 0 {
		seq = o.Seq
	}
	tokens, err := t.integer("training.num_tokens_per_microbatch_per_dp_rank", 16384, 1, 1<<40)
	if err != nil {
		return nil, err
	}
	if tokens%seq != 0 {
		return nil, t.errorf("training.num_tokens_per_microbatch_per_dp_rank", "memsh replays whole sequences: a multiple of max_context_length",
			"%d tokens per micro-batch are not a whole number of %d-token sequences", tokens, seq)
	}
	layout, err := torchtitanDegrees(t, o)
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		layout.layers = torchtitanLayers[key]
		layout.ep = 1 // configs.py: expert parallelism has no effect on a dense model
	}
	micro := int64(1) // trainer.py: num_pp_microbatches only when pipelining
	if layout.pp > 1 {
		if micro, err = t.integer("parallelism.num_pp_microbatches", 1, 1, 1<<20); err != nil {
			return nil, err
		}
		layout.microBatches = micro
	} else {
		t.get("parallelism.num_pp_microbatches")
	}
	batch := tokens / seq * micro
	p.set("batch", num(batch))
	p.set("seq", num(seq))
	if err := torchtitanPyAccum(t, p, tokens*micro, layout.dp()); err != nil {
		return nil, err
	}
	if err := torchtitanPyPrecision(t, p); err != nil {
		return nil, err
	}
	if err := torchtitanPyOptimizer(t, p); err != nil {
		return nil, err
	}
	compiledModel, err := torchtitanCompile(t, p)
	if err != nil {
		return nil, err
	}
	if err := torchtitanPyCheckpoint(t, p, compiledModel); err != nil {
		return nil, err
	}
	if layout.asyncTP, err = torchtitanAsyncTP(t, "compile.enable_async_tensor_parallel", compiledModel, layout.tp); err != nil {
		return nil, err
	}
	sp, err := t.boolean("parallelism.enable_sequence_parallel", true)
	if err != nil {
		return nil, err
	}
	layout.noSP = !sp
	if err := torchtitanPyConverters(t, p, layout.tp > 1 && o.GPUs*o.Nodes > 1); err != nil {
		return nil, err
	}
	if err := torchtitanPyRuntime(t, p, layout); err != nil {
		return nil, err
	}
	p.set("gpu", str(o.GPU))
	return p, layout.apply(t, o, p, batch)
}

// torchtitanPyAccum is trainer.py's gradient accumulation (lines 409-428
// at b5bcd76c6): num_tokens_per_train_step over the tokens every
// data-parallel rank runs per iteration (-1: one iteration).
func torchtitanPyAccum(t *tree, p *plan, perRank, dp int64) error {
	const key = "training.num_tokens_per_train_step"
	step, err := t.integer(key, -1, -1, 1<<50)
	if err != nil {
		return err
	}
	switch {
	case step == 0:
		return t.errorf(key, "-1 runs one iteration per step", "0 tokens per step")
	case step < 0:
		return nil
	case step%(perRank*dp) != 0:
		return t.errorf(key, "torchtitan raises the same: a multiple of the tokens of one iteration",
			"%d is not a multiple of the %d tokens one iteration runs (%d per data-parallel rank x %d ranks)", step, perRank*dp, perRank, dp)
	}
	if accum := step / (perRank * dp); accum > 1 {
		p.set("grad_accum", num(accum))
	}
	return nil
}

// torchtitanPyPrecision is training.dtype and mixed_precision_param, as
// the TOML generation's (configs.py keeps their meaning).
func torchtitanPyPrecision(t *tree, p *plan) error {
	param, err := t.str("training.mixed_precision_param", "bfloat16")
	if err != nil {
		return err
	}
	dtype, err := t.str("training.dtype", "float32")
	if err != nil {
		return err
	}
	switch {
	case dtype != "float32" && dtype != "bfloat16":
		return t.errorf("training.dtype", "torchtitan takes bfloat16 or float32", "unknown dtype %s", quoteKey(dtype))
	case param != "bfloat16" && param != "float32":
		return t.errorf("training.mixed_precision_param", "torchtitan takes bfloat16 or float32", "unknown dtype %s", quoteKey(param))
	case dtype == "bfloat16":
		p.set("precision", str("bf16"))
	case param == "bfloat16":
		p.set("precision", str("bf16-mixed"))
	default:
		p.set("precision", str("fp32"))
	}
	return nil
}

// torchtitanPyOptimizer is OptimizersContainer.Config: one optimizer
// (AdamW or Adam) over every parameter group, its implementation.
func torchtitanPyOptimizer(t *tree, p *plan) error {
	groups, _ := t.get("optimizer.param_groups")
	list, _ := groups.([]any)
	name := "AdamW" // default_adamw's, what every torchtitan config sets
	for i := range list {
		g := fmt.Sprintf("optimizer.param_groups[%d]", i)
		n, err := t.str(g+".optimizer_name", "")
		if err != nil {
			return err
		}
		t.get(g + ".pattern")
		t.get(g + ".optimizer_kwargs") // lr, betas, eps, weight_decay: no memory
		t.get(g + ".load_balance_coeff")
		if i == 0 {
			name = n
		} else if n != name {
			t.notModelled = append(t.notModelled, g+".optimizer_name: "+comment(n)+" beside "+comment(name)+" (memsh steps every parameter with one optimizer)")
		}
	}
	fn, ok := torchtitanOptimizers[name]
	if !ok {
		return t.errorf("optimizer.param_groups", "torchtitan's are AdamW and Adam", "unknown optimizer %s", quoteKey(name))
	}
	args, err := torchtitanImpl(t, true)
	if err != nil {
		return err
	}
	p.set("optimizer", call(fn, args...))
	return torchtitanClip(t, p, false)
}
