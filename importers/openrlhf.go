package importers

import (
	"fmt"
	"path"
	"strings"
)

// openrlhfTrainer reads OpenRLHF's launch scripts (OpenRLHF/OpenRLHF at
// v0.11.0, 3c3be62): a shell script running `deepspeed --module
// openrlhf.cli.train_sft ...` (or torchrun or python -m, or the file
// openrlhf/cli/train_sft.py), its dotted arguments (--ds.zero_stage,
// --model.model_name_or_path, ...) read as argparse reads them with
// train_sft.py's defaults. OpenRLHF trains with its own loop over a
// DeepSpeed engine: what it does is written as the keys the hf importer
// reads (tree.derive), the DeepSpeed config it builds
// (openrlhf/utils/deepspeed/deepspeed_utils.py get_train_ds_config) read
// by the DeepSpeed reader (openrlhf_ds.go), as ms-swift's reader does:
//
//   - the model loaded by Actor (openrlhf/models/actor.py) with
//     AutoModelForCausalLM.from_pretrained in --ds.param_dtype (bf16),
//     --ds.attn_implementation (flash_attention_2), called without labels:
//     its logits rebound to their fp32 copy (output["logits"].to(float32))
//     and scored by flash-attn's triton cross_entropy_loss
//     (models/utils.py log_probs_from_logits; flash-attn 2.8.3 is in
//     requirements.txt), the loop's output holding them until the next
//     micro-batch's forward returns (trainer/sft_trainer.py rebinds it
//     then): hf_config(loss = "flash_cross_entropy", forward_upcast =
//     True), keep_logits = "next";
//   - LoRA when --ds.lora.rank > 0 (alpha 16, dropout 0, all-linear),
//     PEFT's fp32 adapters, enable_input_require_grads;
//   - gradient checkpointing when --model.gradient_checkpointing_enable,
//     non-reentrant unless --model.gradient_checkpointing_reentrant;
//   - the micro batch --train.micro_batch_size (8), the global batch
//     --train.batch_size (128): accumulation batch / (micro x GPUs);
//   - --ds.packing_samples: each micro-batch's samples unpadded into one
//     row (Actor.forward, unpad_and_slice_tensor) under flash attention;
//   - openrlhf.cli.train_dpo: the same model and DeepSpeed engine under
//     dpo(trainer = "openrlhf") (openrlhfDPO, sim/core/dpo_openrlhf.go),
//     the model's plain hf_config (the DPO step scores its logits).
//
// A script of OpenRLHF before 0.10.2 (flat arguments: --pretrain,
// --zero_stage, --bf16) is read by the same code, its names renamed to
// the dotted ones with its release's defaults (openrlhf_flat.go).
var openrlhfTrainer = &trainer{
	name:       "openrlhf",
	about:      "OpenRLHF's launch scripts (deepspeed --module openrlhf.cli.train_sft, the dotted arguments of 0.10.2 and later, read at v0.11.0, and the flat ones of 0.7.0 to 0.10.1 with their release's defaults, memsh.openrlhf=): the model and its config.json, --ds.zero_stage, --ds.param_dtype, --ds.adam_offload, --ds.grad_accum_dtype, --ds.overlap_comm, --ds.lora.*, --ds.packing_samples, --ds.attn_implementation, gradient checkpointing, micro and global batch, --data.max_len; train_dpo as dpo(trainer = \"openrlhf\"); reward models and PPO/GRPO refused with a hint",
	exts:       []string{".sh", ".bash"},
	parseOpts:  parseOpenRLHF,
	modelKey:   "model.model_name_or_path",
	modelAlias: []string{"pretrain"},
	configOnly: true,
	detect: func(t *tree) bool {
		_, ok := t.leaves[openrlhfCommandKey]
		return ok
	},
	plan:     openrlhfPlan,
	noEffect: append(append([]string{}, openrlhfNoEffect...), "deepspeed.steps_per_print", "deepspeed.prescale_gradients", "deepspeed.wall_clock_breakdown", "deepspeed.optimizer.params.*", "deepspeed.checkpoint.*"),
}

// openrlhfCommandKey holds the entry point the script runs
// ("openrlhf.cli.train_sft").
const openrlhfCommandKey = "launcher.command"

// openrlhfRunnerKey holds the program that runs it (deepspeed, torchrun,
// python); its flags are under launcher.*.
const openrlhfRunnerKey = "launcher.runner"

// parseOpenRLHF reads the script's OpenRLHF command into a tree: --name
// value pairs by their dotted names (a name with several values a list,
// one without a value true, as argparse's store_true), the runner's flags
// under launcher.*.
func parseOpenRLHF(file string, data []byte, o Options) (*tree, error) {
	var runner []string
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	// a script reaches this reader when the Megatron-LM and ms-swift
	// readers found no launch of theirs in it: its messages name all three
	l, err := findLaunch(file, data, getenv, "pretrain_gpt.py, ms-swift's `swift sft`, `pt` or `rlhf`, or OpenRLHF's openrlhf.cli.train_sft",
		"torchrun ... pretrain_gpt.py --num-layers ..., NPROC_PER_NODE=8 swift sft --model Qwen/Qwen3-8B ..., or deepspeed --module openrlhf.cli.train_sft --model.model_name_or_path meta-llama/Meta-Llama-3-8B ...",
		func(a []string) ([]string, string, bool) {
			for i, x := range a {
				mod, next := "", i+1
				switch {
				case (x == "--module" || x == "-m") && i+1 < len(a):
					mod, next = a[i+1], i+2
				case strings.HasPrefix(x, "--module="):
					mod = strings.TrimPrefix(x, "--module=")
				default:
					if dir, f := path.Split(x); strings.HasSuffix(dir, "openrlhf/cli/") && path.Ext(f) == ".py" {
						mod = "openrlhf.cli." + strings.TrimSuffix(f, ".py")
					}
				}
				if strings.HasPrefix(mod, "openrlhf.cli.") {
					runner = a[:i]
					return a[next:], mod, true
				}
			}
			return nil, "", false
		})
	if err != nil {
		return nil, err
	}
	t := newTree(file)
	t.leaves[openrlhfCommandKey] = leaf{value: l.launcher, line: l.line}
	if err := openrlhfRunner(t, runner, l.line); err != nil {
		return nil, err
	}
	for k, v := range l.env {
		t.leaves["env."+k] = leaf{value: v, line: l.line}
	}
	args := l.args
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok || name == "" {
			return nil, &Error{File: file, Line: l.line, Msg: fmt.Sprintf("`%s` argument %s is not a --name", l.launcher, quoteKey(args[i])),
				Hint: "memsh reads --name value pairs, as OpenRLHF's argparse does"}
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
	return t, nil
}

// openrlhfRunner reads the launcher before the entry point: DeepSpeed's
// (deepspeed --num_gpus N --num_nodes M), torchrun's (or python -m
// torch.distributed.run: --nproc_per_node, --nnodes), or python (one
// process). Their flags go under launcher.*, dashes as underscores.
func openrlhfRunner(t *tree, runner []string, line int) error {
	prog := "python"
	rest := runner
	if len(runner) > 0 {
		prog, rest = path.Base(runner[0]), runner[1:]
	}
	switch {
	case strings.HasPrefix(prog, "python"):
		prog = "python"
		if len(rest) >= 2 && rest[0] == "-m" && rest[1] == "torch.distributed.run" {
			prog, rest = "torchrun", rest[2:]
		}
	case prog == "deepspeed", prog == "torchrun":
	default:
		return &Error{File: t.file, Line: line, Msg: fmt.Sprintf("OpenRLHF's entry point run by %s, which memsh does not read", prog),
			Hint: "run it with deepspeed --module openrlhf.cli.train_sft ..., torchrun --nproc_per_node 8 -m openrlhf.cli.train_sft ... or python -m"}
	}
	t.leaves[openrlhfRunnerKey] = leaf{value: prog, line: line}
	for i := 0; i < len(rest); i++ {
		name, ok := strings.CutPrefix(rest[i], "--")
		if !ok {
			continue
		}
		name, v, inline := strings.Cut(name, "=")
		if !inline && i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "-") {
			i++
			v = rest[i]
		}
		var val any = true
		if v != "" {
			val = swiftScalar(v)
		}
		t.leaves["launcher."+strings.ReplaceAll(name, "-", "_")] = leaf{value: val, line: line}
	}
	return nil
}

// openrlhfWorld is the job's processes: deepspeed's --num_gpus (every GPU
// of the node when unset: --gpus) and --num_nodes (the hostfile's nodes
// when unset: --nodes), torchrun's --nproc_per_node (1) and --nnodes (1),
// python's one process. A count the script gives and --gpus or --nodes
// contradict is an error.
func openrlhfWorld(t *tree, o Options) (Options, int64, error) {
	runner, _ := t.str(openrlhfRunnerKey, "python")
	gpus, nodes := o.GPUs, o.Nodes
	var gpuKey, nodeKey string
	switch runner {
	case "deepspeed":
		gpuKey, nodeKey = "launcher.num_gpus", "launcher.num_nodes"
		for _, k := range []string{"launcher.include", "launcher.exclude", "launcher.hostfile", "launcher.H"} {
			if v, _ := t.get(k); v != nil {
				return o, 0, t.errorf(k, "give the GPUs and nodes as --num_gpus N --num_nodes M, or leave it out and pass --gpus and --nodes", "DeepSpeed's host and GPU lists are not read")
			}
		}
	case "torchrun":
		gpuKey, nodeKey = "launcher.nproc_per_node", "launcher.nnodes"
		gpus, nodes = 1, 1
	default:
		gpus, nodes = 1, 1
	}
	if gpuKey != "" {
		n, err := t.integer(gpuKey, 0, 1, 1<<16)
		if err != nil {
			return o, 0, err
		}
		m, err := t.integer(nodeKey, 0, 1, 1<<16)
		if err != nil {
			return o, 0, err
		}
		if n > 0 {
			if o.GPUs != 1 && o.GPUs != n {
				return o, 0, t.errorf(gpuKey, "leave --gpus out, or give the script's count", "%d processes a node, where --gpus says %d", n, o.GPUs)
			}
			gpus = n
		}
		if m > 0 {
			if o.Nodes != 1 && o.Nodes != m {
				return o, 0, t.errorf(nodeKey, "leave --nodes out, or give the script's count", "%d nodes, where --nodes says %d", m, o.Nodes)
			}
			nodes = m
		}
	}
	o.GPUs, o.Nodes = gpus, nodes
	return o, gpus * nodes, nil
}

func openrlhfPlan(t *tree, o Options) (*plan, error) {
	cmd, _ := t.str(openrlhfCommandKey, "")
	t.used[openrlhfCommandKey] = true
	dpo := false
	switch entry := strings.TrimPrefix(cmd, "openrlhf.cli."); entry {
	case "train_sft":
	case "train_dpo":
		dpo = true
	case "train_rm":
		return nil, t.errorf(openrlhfCommandKey, "memsh check reads OpenRLHF's train_sft and train_dpo",
			"%s is not modelled: OpenRLHF's reward model (the decoder without its lm_head, a [hidden, 1] value head over its last hidden states, the chosen and rejected rows' values at their last token under a pairwise loss: models/model.py get_llm_for_sequence_regression, trainer/rm_trainer.py) has no plan in memsh, whose hf_config builds the causal LM with its vocabulary head", entry)
	case "train_ppo_ray":
		return nil, t.errorf(openrlhfCommandKey, "write the GRPO step in Starlark: preference = grpo(...) replays TRL's GRPOTrainer's training step with its colocated vLLM engine (docs/grpo.md)",
			"%s (PPO, GRPO and REINFORCE++ over Ray actors with vLLM rollouts) is not modelled", entry)
	default:
		return nil, t.errorf(openrlhfCommandKey, "memsh check reads openrlhf.cli.train_sft and train_dpo", "OpenRLHF's %s is not modelled", entry)
	}
	r, err := openrlhfFlat(t, dpo)
	if err != nil {
		return nil, err
	}
	if r.less(openrlhfFirstDotted) { // a flat script: messages name its arguments
		p, err := openrlhfRead(t, o, dpo)
		return p, openrlhfFlatMessage(err)
	}
	return openrlhfRead(t, o, dpo)
}

// openrlhfRead is the plan of the script's arguments under their dotted
// names (flat ones renamed: openrlhfFlat).
func openrlhfRead(t *tree, o Options, dpo bool) (*plan, error) {
	var world int64
	var err error
	o, world, err = openrlhfWorld(t, o)
	if err != nil {
		return nil, err
	}
	if o, err = openrlhfModel(t, o); err != nil {
		return nil, err
	}
	if err := openrlhfRefused(t); err != nil {
		return nil, err
	}
	if err := openrlhfData(t, o, dpo); err != nil {
		return nil, err
	}
	micro, err := openrlhfBatch(t, world)
	if err != nil {
		return nil, err
	}
	packed, err := openrlhfPacking(t, o, micro, dpo)
	if err != nil {
		return nil, err
	}
	lora, err := openrlhfLoRA(t)
	if err != nil {
		return nil, err
	}
	openrlhfCheckpoint(t)
	if o, err = openrlhfDeepSpeed(t, o); err != nil {
		return nil, err
	}
	run := hfRun{inputGrads: lora, packedRow: packed, logitsLoss: !dpo}
	if dpo {
		if run.preference, err = openrlhfDPO(t); err != nil {
			return nil, err
		}
	}
	p, err := hfPlanAs(t, o, run)
	if err != nil {
		return nil, err
	}
	delete(p.keys, "compile")     // the Trainer's torch_compile: OpenRLHF has none
	for kw, key := range p.keys { // a key of the DeepSpeed config OpenRLHF builds: the argument it comes from
		if arg, ok := openrlhfDSArgs[key]; ok {
			key = arg
		}
		if a, ok := t.alias[key]; ok { // a flat script's own name
			key = a
		}
		p.keys[kw] = key
	}
	if strings.Contains(envOf(t, "PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True") {
		p.set("expandable_segments", "True")
	}
	return p, nil
}
