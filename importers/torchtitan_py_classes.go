package importers

import (
	"fmt"
	"sort"
	"strings"
)

// The stand-ins for torchtitan's config classes and helpers, with the
// fields and defaults of pytorch/torchtitan at b5bcd76c6 (2026-08-21):
// torchtitan/config/configs.py (TrainingConfig, ParallelismConfig,
// CompileConfig, CommConfig, DebugConfig), trainer.py (Trainer.Config),
// distributed/activation_checkpoint.py (FullAC, SelectiveAC,
// MemoryBudgetAC), components/loss.py (CrossEntropyLoss,
// ChunkedLossWrapper), components/quantization (Float8LinearConverter),
// components/optimizer/optimizer.py (default_adamw), models/<m>/__init__.py
// (model_registry). A class of torchtitan not listed (Profiler.Config, a
// dataset) is built open: any field may be set, none is read.

// pyClass is a config class: its fields and their defaults. open classes
// take fields memsh does not list.
type pyClass struct {
	name   string
	fields []pyFieldDef
	open   bool
}

// pyFieldDef is a field: a plain default, or (obj) a default_factory
// building an object of that class.
type pyFieldDef struct {
	name string
	def  any
	obj  string
}

func (c *pyClass) has(name string) bool {
	if c.open {
		return true
	}
	for _, f := range c.fields {
		if f.name == name {
			return true
		}
	}
	return false
}

func (c *pyClass) field(name string) (pyFieldDef, bool) {
	for _, f := range c.fields {
		if f.name == name {
			return f, true
		}
	}
	return pyFieldDef{}, false
}

// defaultOf is a field's default, a fresh object or list for a factory's.
func (c *pyClass) defaultOf(name string) any {
	f, ok := c.field(name)
	switch {
	case !ok:
		return pyOpaque{c.name + "." + name}
	case f.obj != "":
		return pyNew(f.obj)
	}
	if l, ok := f.def.([]any); ok {
		return append([]any{}, l...)
	}
	return f.def
}

func (c *pyClass) fieldNames() string {
	names := make([]string, len(c.fields))
	for i, f := range c.fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// pyNew is an object of a class with every field at its default.
func pyNew(class string) *pyObj {
	o := &pyObj{class: class, known: pyClasses[class], fields: map[string]pyField{}}
	if o.known != nil {
		for _, f := range o.known.fields {
			if f.obj != "" {
				o.fields[f.name] = pyField{v: pyNew(f.obj)}
			}
		}
	}
	return o
}

func fd(name string, def any) pyFieldDef        { return pyFieldDef{name: name, def: def} }
func fobj(name string, class string) pyFieldDef { return pyFieldDef{name: name, obj: class} }

// acFields are ActivationCheckpointing.Config's fields, every policy's.
var acFields = []pyFieldDef{fd("preserve_rng_state", true), fd("determinism_check", "default"), fd("debug", false)}

// pyClasses are the classes memsh reads fields of, by name.
var pyClasses = pyClassTable()

func pyClassTable() map[string]*pyClass {
	m := map[string]*pyClass{}
	for _, c := range []*pyClass{
		{name: "Trainer.Config", fields: []pyFieldDef{
			fd("model_spec", nil), fd("hf_assets_path", "./tests/assets/tokenizer"), fd("dump_folder", "./outputs"),
			fobj("profiler", "Profiler.Config"), fobj("metrics", "MetricsProcessor.Config"), fobj("tokenizer", "HuggingFaceTokenizer.Config"),
			fobj("dataloader", "BaseDataLoader.Config"), fobj("optimizer", "OptimizersContainer.Config"),
			fobj("lr_scheduler", "LRSchedulersContainer.Config"), fobj("training", "TrainingConfig"), fobj("parallelism", "ParallelismConfig"),
			fobj("checkpoint", "CheckpointManager.Config"), fobj("activation_checkpoint", "SelectiveAC.Config"), fobj("compile", "CompileConfig"),
			fobj("comm", "CommConfig"), fobj("validator", "Validator.Config"), fobj("debug", "DebugConfig"), fobj("override", "OverrideConfig"),
			fobj("loss", "BaseLoss.Config"),
		}},
		{name: "TrainingConfig", fields: []pyFieldDef{
			fd("num_tokens_per_microbatch_per_dp_rank", int64(16384)), fd("num_tokens_per_train_step", int64(-1)), fd("max_context_length", int64(2048)),
			fd("max_norm", 1.0), fd("steps", int64(10000)), fd("enable_cpu_offload", false), fd("disable_cuda_graphs", false),
			fd("dtype", "float32"), fd("mixed_precision_param", "bfloat16"), fd("mixed_precision_reduce", "float32"),
			fd("gc_freq", int64(50)), fd("gc_debug", false),
		}},
		{name: "ParallelismConfig", fields: []pyFieldDef{
			fd("data_parallel_replicate_degree", int64(1)), fd("data_parallel_shard_degree", int64(-1)), fd("fsdp_reshard_after_forward", "default"),
			fd("enable_fsdp_symm_mem", false), fd("tensor_parallel_degree", int64(1)), fd("enable_sequence_parallel", true),
			fd("spmd_backend", "spmd_types"), fd("pipeline_parallel_degree", int64(1)), fd("module_fqns_per_model_part", nil),
			fd("pipeline_parallel_first_stage_less_layers", int64(1)), fd("pipeline_parallel_last_stage_less_layers", int64(1)),
			fd("pipeline_parallel_layers_per_stage", nil), fd("pipeline_parallel_schedule", "1F1B"), fd("pipeline_parallel_schedule_csv", ""),
			fd("num_pp_microbatches", int64(1)), fd("context_parallel_degree", int64(1)), fd("context_parallel_load_balancer", "headtail"),
			fd("context_parallel_ptrr_mask_key", nil), fd("expert_parallel_degree", int64(1)),
		}},
		{name: "CompileConfig", fields: []pyFieldDef{
			fd("enable", false), fd("enable_async_tensor_parallel", false), fd("components", []any{"model", "loss"}), fd("backend", "inductor"),
		}},
		{name: "CommConfig", fields: []pyFieldDef{
			fd("init_timeout_seconds", int64(300)), fd("train_timeout_seconds", int64(100)), fd("trace_buf_size", int64(20000)),
			fd("save_traces_folder", "comm_traces"), fd("save_traces_file_prefix", "rank_"), fd("mode", "default"),
		}},
		{name: "DebugConfig", fields: []pyFieldDef{
			fd("seed", nil), fd("spmd_typechecking", false), fd("deterministic", false), fd("deterministic_warn_only", false),
			fd("moe_force_load_balance", false), fd("detect_anomaly", false), fd("batch_invariant", false), fd("print_config", false),
			fd("save_config_file", nil), fd("enable_structured_logging", true),
		}},
		{name: "FullAC.Config", fields: acFields},
		{name: "SelectiveAC.Config", fields: append(append([]pyFieldDef{}, acFields...), fd("force_recompute_mm_shapes_by_fqns", []any{"moe.router.gate"}))},
		{name: "MemoryBudgetAC.Config", fields: append(append([]pyFieldDef{}, acFields...), fd("memory_budget", 0.5), fd("visualize_memory_budget_pareto", false))},
		{name: "BaseLoss.Config"},
		{name: "CrossEntropyLoss.Config", fields: []pyFieldDef{fd("global_vocab_size", nil)}},
		{name: "ChunkedLossWrapper.Config", fields: []pyFieldDef{fd("num_chunks", int64(8)), fobj("loss_fn", "CrossEntropyLoss.Config")}},
		{name: "Float8LinearConverter.Config", fields: []pyFieldDef{
			fd("model_compile_enabled", false), fd("recipe_name", "rowwise"), fd("filter_fqns", []any{}), fd("emulate", false),
		}},
		{name: "OptimizersContainer.Config", open: true, fields: []pyFieldDef{fd("param_groups", []any{}), fd("implementation", "fused")}},
		{name: "ParamGroupConfig", fields: []pyFieldDef{fd("pattern", nil), fd("optimizer_name", nil), fd("optimizer_kwargs", map[string]any{}), fd("load_balance_coeff", nil)}},
		{name: "Validator.Config", open: true, fields: []pyFieldDef{fd("enable", false), fd("freq", int64(10)), fd("steps", int64(-1))}},
		{name: "ModelSpec", open: true, fields: []pyFieldDef{fd("name", nil), fd("flavor", nil)}},
	} {
		m[c.name] = c
	}
	return m
}

// standIn calls a name imported from torchtitan (or Python): a config
// class builds an object; model_registry, default_adamw, cast and len
// are read; any other function's result is a value memsh does not
// compute.
func (e *pyEval) standIn(f pyName, c *pyCall) (any, error) {
	short := f.name
	if short == "" {
		short = f.module[strings.LastIndex(f.module, ".")+1:]
	}
	switch {
	case f.name == "model_registry" && strings.HasPrefix(f.module, "torchtitan.models."):
		return e.modelRegistry(strings.TrimPrefix(f.module, "torchtitan.models."), c)
	case f.name == "default_adamw":
		groups := []any{&pyObj{class: "ParamGroupConfig", known: pyClasses["ParamGroupConfig"], fields: map[string]pyField{
			"pattern": {v: ".*", line: int(c.pos.Line)}, "optimizer_name": {v: "AdamW", line: int(c.pos.Line)},
			"optimizer_kwargs": {v: c.kwargs, line: int(c.pos.Line)}}}}
		o := pyNew("OptimizersContainer.Config")
		o.fields["param_groups"] = pyField{v: groups, line: int(c.pos.Line)}
		return o, nil
	case f.module == "typing" && f.name == "cast" && len(c.args) == 2:
		return c.args[1], nil
	case f.module == "builtins" && f.name == "len" && len(c.args) == 1:
		switch x := c.args[0].(type) {
		case []any:
			return int64(len(x)), nil
		case string:
			return int64(len(x)), nil
		}
		return pyOpaque{"len(" + describe(c.args[0]) + ")"}, nil
	}
	if k := pyClasses[f.name]; k != nil || strings.HasSuffix(f.name, ".Config") || (short != "" && short[0] >= 'A' && short[0] <= 'Z') {
		return e.construct(f.name, k, c)
	}
	return pyOpaque{short + "(...)"}, nil
}

// pyFlatten writes an object's fields into t as dotted keys, with the
// line that set each: the leaves a plan reads. An object field holding
// another class than its default's is also a leaf, the class's name
// (activation_checkpoint = "FullAC.Config"), and so is one set to None
// ("None"); a list of objects is the list of their classes, each
// object's fields under key[i]. An object that holds one around it
// (config.profiler.x = config) is a leaf of its class there; objects
// shared by several fields are written under each, at most pyMaxLen
// objects and list items in all (a few fields each holding the next
// object, level after level, would otherwise write exponentially many
// keys).
func pyFlatten(t *tree, o *pyObj) error {
	w := pyFlattener{t: t, around: map[*pyObj]bool{}}
	return w.object("", o, 0)
}

// pyFlattener is one pyFlatten: the objects on the path to the one being
// written, and how many objects and list items it has written.
type pyFlattener struct {
	t       *tree
	around  map[*pyObj]bool
	written int
}

// object writes o under prefix; line is the line that set the field
// holding it.
func (w *pyFlattener) object(prefix string, o *pyObj, line int) error {
	t := w.t
	if w.written++; w.written > pyMaxLen {
		return w.tooMany(prefix, line)
	}
	if strings.Count(prefix, ".") > 16 {
		return nil
	}
	w.around[o] = true
	defer delete(w.around, o)
	names := make([]string, 0, len(o.fields))
	for n := range o.fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := o.fields[n]
		key := join(prefix, n)
		var def pyFieldDef
		if o.known != nil {
			def, _ = o.known.field(n)
		}
		switch v := f.v.(type) {
		case *pyObj:
			if v.class != def.obj || w.around[v] {
				t.leaves[key] = leaf{value: v.class, line: f.line}
			}
			if w.around[v] {
				continue
			}
			if err := w.object(key, v, f.line); err != nil {
				return err
			}
			continue
		case nil:
			if def.obj != "" {
				t.leaves[key] = leaf{value: "None", line: f.line}
				continue
			}
		case []any:
			var classes []any
			for i, x := range v {
				if xo, ok := x.(*pyObj); ok {
					classes = append(classes, xo.class)
					if w.around[xo] {
						continue
					}
					if err := w.object(fmt.Sprintf("%s[%d]", key, i), xo, f.line); err != nil {
						return err
					}
				}
			}
			if classes != nil {
				t.leaves[key] = leaf{value: classes, line: f.line}
				continue
			}
		}
		if f.line > 0 {
			v, err := w.leafValue(f.v, key, f.line)
			if err != nil {
				return err
			}
			t.leaves[key] = leaf{value: v, line: f.line}
		}
	}
	return nil
}

// leafValue is a value as a tree leaf holds it, for the field key set
// at line. Its list items count against the same budget as the objects
// (a list holding one list ten times, twelve deep, is 10^12 items).
func (w *pyFlattener) leafValue(v any, key string, line int) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, pyOpaque, map[string]any:
		return x, nil
	case []any:
		if w.written += len(x); w.written > pyMaxLen {
			return nil, w.tooMany(key, line)
		}
		out := make([]any, len(x))
		for i, y := range x {
			var err error
			if out[i], err = w.leafValue(y, key, line); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *pyObj:
		return x.class, nil
	}
	return pyOpaque{describe(v)}, nil
}

// tooMany is the error of a config whose objects and lists, written
// out, pass pyMaxLen.
func (w *pyFlattener) tooMany(key string, line int) error {
	return &Error{File: w.t.file, Line: line, Key: key, Msg: fmt.Sprintf("the config's objects and lists, written out field by field, hold more than %d values", pyMaxLen),
		Hint: "an object or list held several times over, level after level, multiplies them: a config holds each once"}
}
