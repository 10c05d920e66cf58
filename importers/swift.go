package importers

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// swiftTrainer reads ms-swift's command line (modelscope/ms-swift): a
// shell script, or the one line of one, that runs `swift sft`, `swift pt`
// or `swift rlhf` with the environment ms-swift's launcher reads
// (NPROC_PER_NODE, NNODES, CUDA_VISIBLE_DEVICES: swift/cli/main.py), its
// arguments read as ms-swift 4.5.2 reads them (swift/arguments/*.py,
// swift/trainers/arguments.py at v4.5.2, ff5128777). ms-swift trains with
// transformers' Trainer (its Seq2SeqTrainer subclass): what it does with
// its arguments is written as the keys the hf importer reads
// (tree.derive), as LLaMA-Factory's reader does, and the hf importer reads
// the rest (hfPlanAs):
//
//   - --tuner_type (ms-swift 4.x; --train_type in 3.x, the same
//     defaults at v3.12.6) lora by default, or full; LoRA rank 8, alpha
//     32, dropout 0.05 on all-linear (TunerArguments), its adapters in
//     fp32 unless --lora_dtype says otherwise (swift/tuners/peft.py
//     _cast_adapter_dtype_hook: PEFT's autocast_adapter_dtype);
//   - --torch_dtype: the weights' dtype, unset the model config.json's
//     (model_meta.py get_model_info_meta, utils.py get_default_torch_dtype:
//     else bf16 on a GPU that has it); the Trainer's bf16 when it is
//     bfloat16, fp16 when float16 or float32 (model_args.py
//     _init_mixed_precision) unless --bf16 / --fp16 say;
//   - gradient checkpointing on (TrainArgumentsMixin), reentrant unless
//     gradient_checkpointing_kwargs say, or DDP over several processes
//     without DeepSpeed or FSDP (mixin.py _fix_gradient_checkpointing),
//     with enable_input_require_grads (_prepare_gradient_checkpointing);
//   - per_device_train_batch_size 1, gradient_accumulation_steps
//     ceil(16 / batch / world size) when unset;
//   - --deepspeed zero0 ... zero3_offload: ms-swift's own presets
//     (swift_config/, read as the Trainer fills their "auto"), a path, or
//     inline JSON;
//   - --attn_impl unset leaves transformers' default (sdpa); flash_attn is
//     flash_attention_2 (swift/model/utils.py AttnImpl); --packing and
//     --padding_free need flash attention (sft_args.py _check_padding_free).
var swiftTrainer = &trainer{
	name:      "swift",
	about:     "ms-swift's command line (a shell script running swift sft or swift pt) with NPROC_PER_NODE, NNODES and CUDA_VISIBLE_DEVICES: --model, --tuner_type (or --train_type) lora or full, LoRA's rank/alpha/dropout/target_modules/lora_dtype, --torch_dtype, --max_length, --packing, --padding_free, --attn_impl, gradient checkpointing, batch and accumulation, --deepspeed's and --fsdp's presets, --quant_method bnb",
	exts:      []string{".sh", ".bash"},
	parseOpts: parseSwift,
	modelKey:  "model",
	detect: func(t *tree) bool {
		_, ok := t.leaves[swiftCommandKey]
		return ok
	},
	plan:     swiftPlan,
	noEffect: append(append([]string{}, swiftNoEffect...), hfTrainer.noEffect...),
}

// swiftCommandKey holds the command the script runs ("swift sft").
const swiftCommandKey = "launcher.command"

// parseSwift reads the script's ms-swift command into a tree: --name
// value pairs by name (a name with several values a list, one without a
// value true, as HfArgumentParser reads a bool), the variables exported
// to it under env.NAME, the command under launcher.command.
func parseSwift(file string, data []byte, o Options) (*tree, error) {
	// a script reaches this reader when the Megatron-LM reader found no
	// pretrain_gpt.py in it: its messages name both
	var runner []string // the launcher's command before swift/cli/sft.py
	l, err := findLaunch(file, data, func(string) string { return "" }, "pretrain_gpt.py or ms-swift's `swift sft`, `pt` or `rlhf`",
		"torchrun ... pretrain_gpt.py --num-layers ..., or NPROC_PER_NODE=8 swift sft --model Qwen/Qwen3-8B ...",
		func(a []string) ([]string, string, bool) {
			if len(a) >= 2 && swiftCommands[path.Base(a[0])][a[1]] {
				return a[2:], path.Base(a[0]) + " " + a[1], true
			}
			// the entry point's file run by a launcher of the user's
			// (torchrun ... swift/cli/sft.py, as examples/train/multi-node
			// does), python or accelerate launch
			for i, x := range a {
				if dir, f := path.Split(x); strings.HasSuffix(dir, "swift/cli/") && swiftCommands["swift"][strings.TrimSuffix(f, ".py")] && path.Ext(f) == ".py" {
					runner = a[:i]
					return a[i+1:], "swift " + strings.TrimSuffix(f, ".py"), true
				}
			}
			return nil, "", false
		})
	if err != nil {
		return nil, err
	}
	t := newTree(file)
	t.leaves[swiftCommandKey] = leaf{value: l.launcher, line: l.line}
	if err := swiftRunner(t, runner, l.line); err != nil {
		return nil, err
	}
	for k, v := range l.env {
		t.leaves["env."+k] = leaf{value: v, line: l.line}
	}
	args, config := l.args, ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		if ext := strings.ToLower(path.Ext(args[0])); ext == ".yaml" || ext == ".yml" || ext == ".json" {
			config, args = args[0], args[1:] // read after the command line's own, which win (swiftConfigArgs)
		}
	}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok || name == "" {
			return nil, &Error{File: file, Line: l.line, Msg: fmt.Sprintf("`%s` argument %s is not a --name", l.launcher, quoteKey(args[i])),
				Hint: "memsh reads --name value pairs, as ms-swift's HfArgumentParser does"}
		}
		name, inline, hasInline := strings.Cut(name, "=")
		var vals []string
		if hasInline {
			vals = []string{inline}
		} else {
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
				vals = append(vals, args[i])
			}
		}
		var v any = true
		switch len(vals) {
		case 0:
		case 1:
			v = swiftScalar(vals[0])
		default:
			list := make([]any, len(vals))
			for j, x := range vals {
				list[j] = swiftScalar(x)
			}
			v = list
		}
		if old, dup := t.leaves[name]; dup && fmt.Sprint(old.value) != fmt.Sprint(v) {
			return nil, &Error{File: file, Line: l.line, Key: name, Msg: fmt.Sprintf("given twice: %s and %s", describe(old.value), describe(v)),
				Hint: "argparse keeps the last; give the argument once"}
		}
		t.leaves[name] = leaf{value: v, line: l.line}
	}
	if config != "" {
		if err := swiftConfigArgs(t, config, l.line, o.ReadFile); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// swiftScalar is one command-line value as a YAML scalar would read it
// (8, 0.05, true), a string when it is not one.
func swiftScalar(s string) any {
	v, err := parseScalar(s)
	if err != nil || v == nil {
		return s
	}
	return v
}

func swiftPlan(t *tree, o Options) (*plan, error) {
	cmd, _ := t.str(swiftCommandKey, "")
	t.used[swiftCommandKey] = true
	sub := cmd[strings.IndexByte(cmd, ' ')+1:]
	if strings.HasPrefix(cmd, "megatron ") {
		return nil, t.errorf(swiftCommandKey, "write the plan in Starlark: train(hf_config(\"config.json\"), precision = \"megatron\", parallel = parallel(tp = ..., pp = ..., ep = ..., distributed_optimizer = True)), as the Megatron-SWIFT calibration rows do (docs/check.md)",
			"Megatron-SWIFT (`%s`) is not read: memsh check reads `swift sft`, `swift pt` and `swift rlhf`", cmd)
	}
	if sub == "rlhf" {
		return nil, swiftRLHF(t)
	}
	o, world, err := swiftWorld(t, o)
	if err != nil {
		return nil, err
	}
	kind, err := swiftTuner(t)
	if err != nil {
		return nil, err
	}
	name, err := t.str("model", "")
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, &Error{File: t.file, Key: "model", Msg: "missing: ms-swift requires it", Hint: "--model Qwen/Qwen3-8B (a Hub id or a folder)"}
	}
	t.derive("model_name_or_path", name, "model")
	if task, err := t.str("task_type", "causal_lm"); err != nil {
		return nil, err
	} else if task != "causal_lm" {
		return nil, t.errorf("task_type", "memsh replays causal-LM training: leave task_type out", "task_type %s is not modelled (its head and loss differ)", quoteKey(task))
	}
	if err := swiftDtype(t, o); err != nil {
		return nil, err
	}
	if err := swiftQuant(t, kind); err != nil {
		return nil, err
	}
	run := hfRun{}
	if run.adaptersInBaseDtype, err = swiftLoRA(t, kind); err != nil {
		return nil, err
	}
	if err := swiftFull(t, kind); err != nil {
		return nil, err
	}
	if err := swiftMultimodal(t, o, kind); err != nil {
		return nil, err
	}
	if err := swiftData(t, o); err != nil {
		return nil, err
	}
	ds, err := swiftDeepSpeed(t, &o)
	if err != nil {
		return nil, err
	}
	fsdp, err := swiftFSDP(t, o)
	if err != nil {
		return nil, err
	}
	if ds && fsdp {
		return nil, t.errorf("fsdp", "ms-swift raises the same: keep one", "and deepspeed are both set")
	}
	if err := swiftBatch(t, world); err != nil {
		return nil, err
	}
	if run.inputGrads, err = swiftCheckpoint(t, world, ds || fsdp); err != nil { // enable_input_require_grads under checkpointing
		return nil, err
	}
	if err := swiftRefused(t); err != nil {
		return nil, err
	}
	p, err := hfPlanAs(t, o, run)
	if err != nil {
		return nil, err
	}
	if strings.Contains(envOf(t, "PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True") {
		p.set("expandable_segments", "True")
	}
	return p, nil
}

// envOf is the variable the script exports to ms-swift (marked read).
func envOf(t *tree, name string) string {
	s, _ := t.str("env."+name, "")
	return s
}

// swiftWorld is the job's processes from the variables ms-swift's
// launcher reads (swift/cli/main.py): with NPROC_PER_NODE or NNODES it
// runs torchrun with them (NPROC_PER_NODE processes a node), without
// either one Python process, which spreads the model over every GPU it
// sees (device_map, naive model parallelism) when it sees several. The
// count is that of the script; --gpus and --nodes, when given, must agree.
func swiftWorld(t *tree, o Options) (Options, int64, error) {
	nprocKey, nnodesKey := "env.NPROC_PER_NODE", "env.NNODES"
	runner, _ := t.str(swiftRunnerKey, "")
	switch runner {
	case "torchrun": // its own flags; one process on one node unless they say
		nprocKey, nnodesKey = "launcher.nproc_per_node", "launcher.nnodes"
		swiftDefault(t, nprocKey, int64(1))
		for _, k := range []string{"env.NPROC_PER_NODE", "env.NNODES"} {
			t.get(k) // torchrun's flags, not ms-swift's launcher, start the processes
		}
	case swiftConfigRunner: // a config file on its own: its ENV, else --gpus and --nodes
		swiftDefault(t, nprocKey, o.GPUs)
		if o.Nodes > 1 {
			swiftDefault(t, nnodesKey, o.Nodes)
		}
	case "python": // one process, as ms-swift's launcher without NPROC_PER_NODE
		nprocKey, nnodesKey = swiftRunnerKey+".nproc", swiftRunnerKey+".nnodes" // never set
	}
	nproc, err := t.integer(nprocKey, 0, 1, 1<<16)
	if err != nil {
		return o, 0, err
	}
	nnodes, err := t.integer(nnodesKey, 0, 1, 1<<16)
	if err != nil {
		return o, 0, err
	}
	visible := int64(0)
	if v := envOf(t, "CUDA_VISIBLE_DEVICES"); v != "" {
		visible = int64(len(strings.Split(v, ",")))
	}
	switch {
	case nproc == 0 && nnodes == 0:
		gpus := o.GPUs
		if visible > 0 {
			gpus = visible
		}
		if gpus > 1 {
			key, what := "env.NPROC_PER_NODE", "unset: ms-swift then runs"
			if runner == "python" {
				key, what = swiftRunnerKey, "python: ms-swift runs"
			}
			return o, 0, t.errorf(key, fmt.Sprintf("NPROC_PER_NODE=%d runs one process a GPU (DDP, DeepSpeed); memsh replays that, not device_map's layers spread over GPUs", gpus),
				"%s one process over the %d GPUs it sees, the model's layers spread over them (device_map), which memsh does not model", what, gpus)
		}
		o.GPUs, o.Nodes = 1, 1
		return o, 1, nil
	case nproc == 0: // torchrun's default: one process a node
		nproc = 1
	case nnodes == 0:
		nnodes = 1
	}
	if visible > 0 && visible < nproc {
		return o, 0, t.errorf(nprocKey, "list a GPU for each process in CUDA_VISIBLE_DEVICES", "%d processes a node see %d GPUs", nproc, visible)
	}
	if o.GPUs != 1 && o.GPUs != nproc {
		return o, 0, t.errorf(nprocKey, "leave --gpus out, or give the script's count", "%d processes a node, where --gpus says %d", nproc, o.GPUs)
	}
	if o.Nodes != 1 && o.Nodes != nnodes {
		return o, 0, t.errorf(nnodesKey, "leave --nodes out, or give the script's count", "%d nodes, where --nodes says %d", nnodes, o.Nodes)
	}
	o.GPUs, o.Nodes = nproc, nnodes
	return o, nproc * nnodes, nil
}

// swiftTuner is --tuner_type (ms-swift 4.x) or --train_type (its name in
// 3.x; 4.x refuses it as an unknown argument): lora or full.
func swiftTuner(t *tree) (string, error) {
	key := "tuner_type"
	t.get(key)
	if l, ok := t.leaves["train_type"]; ok && l.value != nil {
		if l, both := t.leaves["tuner_type"]; both && l.value != nil {
			return "", t.errorf("train_type", "keep --tuner_type, its name from ms-swift 4.0 (4.x refuses --train_type)", "and tuner_type are both given")
		}
		key = "train_type"
	}
	kind, err := t.str(key, "lora")
	if err != nil {
		return "", err
	}
	if kind != "lora" && kind != "full" {
		return "", t.errorf(key, "memsh replays lora and full", "tuner %s is not modelled", quoteKey(kind))
	}
	if backend, err := t.str("tuner_backend", "peft"); err != nil {
		return "", err
	} else if backend != "peft" {
		return "", t.errorf("tuner_backend", "memsh replays PEFT's adapters: leave it out (peft)", "tuner backend %s is not modelled", quoteKey(backend))
	}
	return kind, nil
}

// swiftDtype is --torch_dtype, else the model config.json's dtype, else
// bf16 (get_default_torch_dtype on a GPU with bf16), and the Trainer's
// bf16 or fp16 from it (_init_mixed_precision).
func swiftDtype(t *tree, o Options) error {
	dtype, err := t.str("torch_dtype", "")
	if err != nil {
		return err
	}
	switch dtype {
	case "":
		if dtype, err = swiftConfigDtype(t, o); err != nil {
			return err
		}
		t.derive("torch_dtype", dtype, "model")
	case "bfloat16", "float16", "float32":
	default:
		return t.errorf("torch_dtype", "bfloat16, float16 or float32", "unknown dtype %s", quoteKey(dtype))
	}
	bf16, err := t.boolean("bf16", dtype == "bfloat16")
	if err != nil {
		return err
	}
	fp16, err := t.boolean("fp16", dtype != "bfloat16")
	if err != nil {
		return err
	}
	if _, ok := t.leaves["bf16"]; !ok {
		t.derive("bf16", bf16, "torch_dtype")
	}
	if _, ok := t.leaves["fp16"]; !ok {
		t.derive("fp16", fp16, "torch_dtype")
	}
	return nil
}

// swiftConfigDtype is the dtype ms-swift loads a model in when
// --torch_dtype is unset: its config.json's dtype (or torch_dtype), a zoo
// model's checkpoint dtype, else bfloat16.
func swiftConfigDtype(t *tree, o Options) (string, error) {
	if o.ModelData != nil {
		mt, err := parseJSON(o.Model, o.ModelData)
		if err != nil {
			return "", err
		}
		for _, key := range []string{"dtype", "torch_dtype"} {
			switch d, _ := mt.str(key, ""); d {
			case "bfloat16", "float16", "float32":
				return d, nil
			case "":
			default:
				return "", t.errorf("model", "set --torch_dtype bfloat16 (or float16, float32)", "the model's dtype %s is not modelled", quoteKey(d))
			}
		}
		return "bfloat16", nil
	}
	name, _ := t.str("model", "")
	if m, ok := hfModels[name]; ok && o.Model == "" {
		return zooCheckpointDtype(m), nil
	}
	return "bfloat16", nil
}

// swiftQuant is --quant_method bnb with --quant_bits 4 (nf4, double
// quantization by default: QuantizeArguments) or 8.
func swiftQuant(t *tree, kind string) error {
	method, err := t.str("quant_method", "")
	if err != nil {
		return err
	}
	bits, err := t.integer("quant_bits", 0, 1, 8)
	if err != nil {
		return err
	}
	kindQ, err := t.str("bnb_4bit_quant_type", "nf4")
	if err != nil {
		return err
	}
	double, err := t.boolean("bnb_4bit_use_double_quant", true)
	if err != nil {
		return err
	}
	t.get("bnb_4bit_compute_dtype") // the adapters' compute dtype: the weights are dequantized to it, transients only
	storage, err := t.str("bnb_4bit_quant_storage", "")
	if err != nil {
		return err
	}
	switch {
	case method == "" && bits == 0:
		return nil
	case method != "bnb":
		return t.errorf("quant_method", "memsh models bitsandbytes: --quant_method bnb --quant_bits 4", "quantization method %s is not modelled", quoteKey(method))
	case kind != "lora":
		return t.errorf("quant_bits", "train LoRA adapters on a quantized model: --tuner_type lora", "a quantized model's weights do not train (tuner %s)", quoteKey(kind))
	case bits == 4:
		if kindQ != "nf4" {
			return t.errorf("bnb_4bit_quant_type", "memsh models nf4", "quant type %s is not modelled", quoteKey(kindQ))
		}
		t.derive("load_in_4bit", true, "quant_bits")
		t.derive("use_bnb_nested_quant", double, "bnb_4bit_use_double_quant")
		if storage != "" {
			t.notModelled = append(t.notModelled, "bnb_4bit_quant_storage: the 4-bit codes stored as "+storage+" (the same bytes: FSDP's view)")
		}
	case bits == 8:
		t.derive("load_in_8bit", true, "quant_bits")
	default:
		return t.errorf("quant_bits", "4 or 8 with bitsandbytes", "%d bits are not modelled", bits)
	}
	return nil
}

// swiftLoRA is --tuner_type lora's adapters: PEFT's LoraConfig from
// TunerArguments (swift/pipelines/train/tuner.py prepare_adapter). It
// says whether the adapters are in the base weights' dtype (--lora_dtype
// the weights' own).
func swiftLoRA(t *tree, kind string) (bool, error) {
	rank, err := t.integer("lora_rank", 8, 1, 1<<16)
	if err != nil {
		return false, err
	}
	alpha, err := t.integer("lora_alpha", 32, 1, 1<<20)
	if err != nil {
		return false, err
	}
	dropout, err := t.probability("lora_dropout", 0.05)
	if err != nil {
		return false, err
	}
	v, _ := t.get("target_modules")
	var mods []any
	switch x := v.(type) {
	case nil:
		mods = []any{"all-linear"}
	case string:
		mods = []any{x}
	case []any:
		mods = x
	default:
		return false, t.errorf("target_modules", "module names, or all-linear", "want names, got %s", describe(v))
	}
	for _, m := range mods {
		s, ok := m.(string)
		if !ok {
			return false, t.errorf("target_modules", "module names, or all-linear", "want names, got an item %s", describe(m))
		}
		if s == "all-embedding" || s == "all-norm" || strings.HasPrefix(s, "all-") && s != "all-linear" {
			return false, t.errorf("target_modules", "all-linear, or module names (q_proj, v_proj, ...)", "%s is not modelled", quoteKey(s))
		}
	}
	regex, err := t.str("target_regex", "")
	if err != nil {
		return false, err
	}
	params, err := t.strs("target_parameters")
	if err != nil {
		return false, err
	}
	dtype, err := t.str("lora_dtype", "")
	if err != nil {
		return false, err
	}
	if kind != "lora" {
		return false, nil
	}
	t.derive("use_peft", true, swiftTunerKey(t))
	t.derive("lora_r", rank, "lora_rank")
	t.derive("lora_alpha", alpha, "lora_alpha")
	t.derive("lora_dropout", dropout, "lora_dropout")
	if regex != "" { // TunerArguments.__post_init__: target_regex replaces target_modules
		t.derive("lora_target_modules", regex, "target_regex")
	} else {
		t.derive("lora_target_modules", mods, "target_modules")
	}
	if len(params) > 0 {
		list := make([]any, len(params))
		for i, p := range params {
			list[i] = p
		}
		t.derive("lora_target_parameters", list, "target_parameters")
	}
	t.notModelledIf("use_rslora", "rank-stabilised scaling (the same tensors)")
	t.notModelledIf("use_dora", "DoRA's magnitude vectors and the weight norm it computes")
	if v, _ := t.get("modules_to_save"); v != nil {
		if l, ok := v.([]any); !ok || len(l) > 0 {
			t.notModelled = append(t.notModelled, "modules_to_save: modules trained in full beside the adapters")
		}
	}
	if b, err := t.str("lora_bias", "none"); err != nil {
		return false, err
	} else if b != "none" {
		t.notModelled = append(t.notModelled, "lora_bias: "+b+": the target layers' biases train (a bias's gradient and AdamW state)")
	}
	if w, err := t.str("init_weights", "true"); err != nil {
		return false, err
	} else if w != "true" && w != "gaussian" && w != "false" {
		t.notModelled = append(t.notModelled, "init_weights: "+w+": the adapters' initialisation (PiSSA's, OLoRA's, LoftQ's or LoRA-GA's SVD and passes before training), transients of the setup")
	}
	base, _ := t.str("torch_dtype", "")
	switch dtype {
	case "", "float32": // PEFT's autocast_adapter_dtype: fp32 adapters
		return false, nil
	case base:
		return true, nil
	}
	return false, t.errorf("lora_dtype", "leave it out (fp32 adapters) or give the weights' dtype "+base, "adapters in %s over %s weights are not modelled", dtype, base)
}

// swiftTunerKey is the key that named the tuner (tuner_type, or 3.x's
// train_type), for the derived keys' errors.
func swiftTunerKey(t *tree) string {
	if l, ok := t.leaves["train_type"]; ok && l.value != nil {
		return "train_type"
	}
	return "tuner_type"
}

// swiftFull is what --tuner_type full reads beyond the weights: the
// parameters it freezes or trains by name (TunerArguments), which a
// text model's full fine-tune does not change otherwise.
func swiftFull(t *tree, kind string) error {
	for _, k := range []string{"freeze_parameters", "freeze_parameters_regex", "trainable_parameters", "trainable_parameters_regex"} {
		if v, _ := t.get(k); v != nil {
			if l, ok := v.([]any); ok && len(l) == 0 {
				continue
			}
			if kind == "full" {
				t.notModelled = append(t.notModelled, k+": parameters frozen or trained by name beside the full fine-tune (their gradients and AdamW state)")
			}
		}
	}
	ratio, err := t.integerOrFloat("freeze_parameters_ratio")
	if err != nil {
		return err
	}
	if ratio != 0 && kind == "full" {
		t.notModelled = append(t.notModelled, "freeze_parameters_ratio: the first "+strconv.FormatFloat(ratio*100, 'g', 4, 64)+"% of the parameters frozen (no gradient or AdamW state)")
	}
	// a multimodal model's tower's checkpointing (vit_gradient_checkpointing:
	// the tower runs under no_grad when frozen, swiftMultimodal) and its
	// learning rates (param groups of the same optimizer)
	for _, k := range []string{"vit_gradient_checkpointing", "vit_lr", "aligner_lr"} {
		t.get(k)
	}
	return nil
}

// integerOrFloat reads a number key; 0 when absent.
func (t *tree) integerOrFloat(key string) (float64, error) {
	v, _ := t.get(key)
	if v == nil {
		return 0, nil
	}
	f, ok := toFloat(v)
	if !ok {
		return 0, t.errorf(key, "", "want a number, got %s", describe(v))
	}
	return f, nil
}

// swiftMultimodal lists what ms-swift freezes in a multimodal model (a
// config.json with a vision_config) that memsh's plan trains: with
// --freeze_vit and --freeze_aligner (true by default, TunerArguments)
// LoRA's all-linear targets the language model's linear layers only and
// a full fine-tune freezes the vision tower and the aligner
// (tuner_args.py _init_multimodal_full, get_target_modules), where
// lora(targets = ["all-linear"]) and a full plan train the tower's too.
func swiftMultimodal(t *tree, o Options, kind string) error {
	vit, err := t.boolean("freeze_vit", true)
	if err != nil {
		return err
	}
	aligner, err := t.boolean("freeze_aligner", true)
	if err != nil {
		return err
	}
	llm, err := t.boolean("freeze_llm", false)
	if err != nil {
		return err
	}
	if o.ModelData == nil {
		return nil
	}
	mt, err := parseJSON(o.Model, o.ModelData)
	if err != nil {
		return err
	}
	multimodal := false
	for k := range mt.leaves {
		multimodal = multimodal || strings.HasPrefix(k, "vision_config.")
	}
	if multimodal && (vit || aligner || llm) {
		t.notModelled = append(t.notModelled, fmt.Sprintf("freeze_vit %v, freeze_aligner %v, freeze_llm %v: ms-swift trains only the parts not frozen "+
			"(LoRA's all-linear on their linear layers, a %s fine-tune of them); memsh's plan makes the vision tower's and aligner's weights "+
			"trainable too (adapters on their linear layers; in full, their gradients and optimizer states)", vit, aligner, llm, kind))
	}
	return nil
}

// swiftRunnerKey holds the program that runs ms-swift's entry point's
// file (torchrun, python), absent for ms-swift's own launcher.
const swiftRunnerKey = "launcher.runner"

// swiftRunner reads the launcher of ms-swift's entry point's file:
// torchrun (or python -m torch.distributed.run) with its
// --nproc_per_node and --nnodes under launcher.*, or python (one
// process); another (accelerate launch, deepspeed) is refused.
func swiftRunner(t *tree, runner []string, line int) error {
	if len(runner) == 0 {
		return nil
	}
	prog := path.Base(runner[0])
	rest := runner[1:]
	if strings.HasPrefix(prog, "python") {
		if len(rest) >= 2 && rest[0] == "-m" && rest[1] == "torch.distributed.run" {
			prog, rest = "torchrun", rest[2:]
		} else {
			t.leaves[swiftRunnerKey] = leaf{value: "python", line: line}
			return nil
		}
	}
	if prog != "torchrun" {
		return &Error{File: t.file, Line: line, Msg: fmt.Sprintf("ms-swift's entry point run by %s, which memsh does not read", prog),
			Hint: "run it with ms-swift's own launcher (NPROC_PER_NODE=8 swift sft ...) or torchrun --nproc_per_node 8 swift/cli/sft.py ..."}
	}
	t.leaves[swiftRunnerKey] = leaf{value: "torchrun", line: line}
	for i := 0; i < len(rest); i++ {
		name, ok := strings.CutPrefix(rest[i], "--")
		if !ok {
			continue
		}
		name, v, inline := strings.Cut(name, "=")
		if !inline && i+1 < len(rest) {
			i++
			v = rest[i]
		}
		name = strings.ReplaceAll(name, "-", "_")
		t.leaves["launcher."+name] = leaf{value: swiftScalar(v), line: line}
	}
	return nil
}
