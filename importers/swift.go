package importers

import (
	"fmt"
	"path"
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
	about:     "ms-swift's command line (a shell script running swift sft or swift pt, or Megatron-SWIFT's megatron sft or megatron pt) with NPROC_PER_NODE, NNODES and CUDA_VISIBLE_DEVICES: --model, --tuner_type (or --train_type) lora or full, LoRA's rank/alpha/dropout/target_modules/lora_dtype, --torch_dtype, --max_length, --packing, --padding_free, --attn_impl, gradient checkpointing, batch and accumulation, --deepspeed's and --fsdp's presets, --quant_method bnb",
	exts:      []string{".sh", ".bash"},
	parseOpts: parseSwift,
	modelKey:  "model",
	detect: func(t *tree) bool {
		_, ok := t.leaves[swiftCommandKey]
		return ok
	},
	plan:     swiftPlan,
	noEffect: append(append(append([]string{}, swiftNoEffect...), megatronSwiftNoEffect...), hfTrainer.noEffect...),
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
				dir, f := path.Split(x)
				cmd := "swift" // swift/cli/sft.py; Megatron-SWIFT's swift/cli/_megatron/sft.py
				if strings.HasSuffix(dir, "swift/cli/_megatron/") {
					cmd, dir = "megatron", strings.TrimSuffix(dir, "_megatron/")
				}
				if strings.HasSuffix(dir, "swift/cli/") && swiftCommands[cmd][strings.TrimSuffix(f, ".py")] && path.Ext(f) == ".py" {
					runner = a[:i]
					return a[i+1:], cmd + " " + strings.TrimSuffix(f, ".py"), true
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
		return megatronSwiftPlan(t, o, sub)
	}
	if sub == "rlhf" {
		return nil, swiftRLHF(t)
	}
	o, world, err := swiftWorld(t, o, false)
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

// swiftMegatron says whether the script runs Megatron-SWIFT (`megatron
// sft`), whose model is always built from its config.json.
func swiftMegatron(t *tree) bool {
	l, ok := t.leaves[swiftCommandKey]
	s, _ := l.value.(string)
	return ok && strings.HasPrefix(s, "megatron ")
}

// envOf is the variable the script exports to ms-swift (marked read).
func envOf(t *tree, name string) string {
	v, _ := t.get("env." + name)
	if v == nil {
		return ""
	}
	return fmt.Sprint(v) // a string in a script; a number from an env.NAME=1 override
}
