package importers

import (
	"fmt"
	"strings"
)

// hfAccelerate reads the accelerate config a Trainer job is launched with
// (`accelerate launch --config_file accel.yaml train.py ...`, named by
// accelerate_config=, read from the config's folder as deepspeed= is):
// the YAML `accelerate config` writes. accelerate 1.16's launcher copies
// its keys onto its arguments (commands/launch.py
// _validate_launch_command l.1313-1333, an fsdp_config key without the
// "fsdp_" prefix given it) and exports them as FSDP_* and ACCELERATE_*
// environment variables (utils/launch.py prepare_multi_gpu_env
// l.249-305), which the Trainer's plugins read where the Trainer's own
// arguments leave a field unset (utils/dataclasses.py
// FullyShardedDataParallelPlugin.__post_init__ l.1702-1870;
// transformers 5.25.0 training_args.py l.1614-1618 and
// _process_fsdp_args l.2775-2885). What the YAML decides is written
// into the Trainer's keys (bf16, fsdp, fsdp_config.*, an inline
// deepspeed.*), so hfLayout, hfDeepSpeed and their helpers read it as they
// read the Trainer's; the GPUs it launches replace o's. The YAML's keys
// are listed as accelerate_config.KEY; accelerate_config.KEY=value on the
// command line replaces one, as accelerate launch's --KEY does.
func hfAccelerate(t *tree, o Options) (Options, error) {
	v, _ := t.get("accelerate_config")
	if v == nil {
		return o, nil
	}
	name, ok := v.(string)
	if !ok || name == "" {
		return o, t.errorf("accelerate_config", "the accelerate config's path, e.g. accelerate_config=fsdp.yaml", "want a path, got %s", describe(v))
	}
	if o.ReadFile == nil {
		return o, t.errorf("accelerate_config", "run memsh check on the Trainer's config file", "no file can be read here")
	}
	data, err := o.ReadFile(name)
	if err != nil {
		return o, t.errorf("accelerate_config", "the path is read from the config's folder", "cannot read the accelerate config: %v", err)
	}
	a, err := parseYAML(name, data)
	if err != nil {
		return o, err
	}
	for k, l := range t.leaves { // accelerate_config.KEY=value: the launch command's --KEY, which wins over the file's
		if sub, ok := strings.CutPrefix(k, "accelerate_config."); ok && l.override {
			a.leaves[sub] = l
		}
	}
	env, err := a.str("compute_environment", "LOCAL_MACHINE")
	if err != nil {
		return o, err
	}
	if env != "LOCAL_MACHINE" { // the launcher applies the file's defaults on a local machine only (l.1313)
		return o, a.errorf("compute_environment", "memsh reads LOCAL_MACHINE configs", "%s is not modelled", quoteKey(env))
	}
	if cpu, err := a.boolean("use_cpu", false); err != nil {
		return o, err
	} else if cpu {
		return o, a.errorf("use_cpu", "memsh replays a step on GPUs", "a run on the CPU is not modelled")
	}
	kind, err := a.str("distributed_type", "")
	if err != nil {
		return o, err
	}
	switch kind {
	case "NO", "MULTI_GPU", "FSDP", "DEEPSPEED":
	case "":
		return o, a.errorf("distributed_type", "NO, MULTI_GPU, FSDP or DEEPSPEED", "missing: accelerate's ClusterConfig requires it")
	default:
		return o, a.errorf("distributed_type", "memsh reads NO, MULTI_GPU, FSDP and DEEPSPEED", "%s is not modelled", quoteKey(kind))
	}
	if o, err = hfAccelerateGPUs(a, o, kind); err != nil {
		return o, err
	}
	mp, err := hfAccelerateMixedPrecision(t, a, kind)
	if err != nil {
		return o, err
	}
	switch kind {
	case "FSDP":
		err = hfAccelerateFSDP(t, a)
	case "DEEPSPEED":
		err = hfAccelerateDeepSpeed(t, a, o, mp)
	}
	if err != nil {
		return o, err
	}
	if backend, err := a.str("dynamo_config.dynamo_backend", "NO"); err != nil {
		return o, err
	} else if !strings.EqualFold(backend, "NO") {
		a.notModelled = append(a.notModelled, "dynamo_config.dynamo_backend: accelerate's torch.compile of the model ("+backend+"): memsh's compile=True is the Trainer's torch_compile")
	}
	a.notModelledUnder("parallelism_config", "accelerate's ParallelismConfig (tensor, context or HSDP meshes): memsh replays data parallelism over every GPU")
	a.notModelledUnder("fp8_config", "accelerate's fp8 recipes")
	hfAccelerateMerge(t, a, kind)
	return o, nil
}

// hfAccelerateGPUs is the GPUs the launcher starts: num_processes in all
// (accelerate's total, not per machine: utils/launch.py l.199-209 gives
// torchrun num_processes // num_machines a node), over num_machines.
// --gpus and --nodes left at 1 take the file's; otherwise they must say
// the same.
func hfAccelerateGPUs(a *tree, o Options, kind string) (Options, error) {
	procs, err := a.integer("num_processes", -1, -1, 1<<20)
	if err != nil {
		return o, err
	}
	machines, err := a.integer("num_machines", 1, 1, 1<<16)
	if err != nil {
		return o, err
	}
	if procs == 0 {
		return o, a.errorf("num_processes", "the GPUs in all, over every machine", "0 processes")
	}
	if kind == "NO" { // one process, whatever the counts say (launch_command's simple_launcher)
		if procs > 1 || machines > 1 {
			return o, a.errorf("num_processes", "MULTI_GPU or FSDP to run more than one", "distributed_type NO launches one process, got num_processes %d on %d machines", procs, machines)
		}
		procs = 1
	}
	if procs < 0 { // -1: the launch command's --num_processes (launch.py l.1355-1356): --gpus and --nodes say it
		if o.Nodes != machines && o.Nodes != 1 {
			return o, a.errorf("num_machines", "say the same machines as --nodes", "%d machines, and --nodes %d", machines, o.Nodes)
		}
		if o.Nodes == 1 && machines > 1 {
			if o.GPUs%machines != 0 {
				return o, a.errorf("num_machines", "--gpus is the GPUs a node: give --nodes", "%d machines do not divide --gpus %d", machines, o.GPUs)
			}
			o.GPUs, o.Nodes = o.GPUs/machines, machines
		}
		return o, nil
	}
	if procs%machines != 0 {
		return o, a.errorf("num_processes", "accelerate's num_processes counts every machine's processes: a multiple of num_machines",
			"%d processes do not divide over %d machines", procs, machines)
	}
	per := procs / machines
	switch {
	case o.GPUs == 1 && o.Nodes == 1:
		o.GPUs, o.Nodes = per, machines
	case o.GPUs != per || o.Nodes != machines:
		return o, a.errorf("num_processes", "leave --gpus and --nodes out, give the same counts (--gpus is the GPUs a node), "+
			"or say accelerate launch's --num_processes: accelerate_config.num_processes=N",
			"%d over num_machines %d (%d GPUs a machine) disagrees with --gpus %d --nodes %d", procs, machines, per, o.GPUs, o.Nodes)
	}
	return o, nil
}

// hfAccelerateMixedPrecision is the autocast the Trainer asks accelerate
// for: its own fp16 or bf16 when set, else the launcher's
// ACCELERATE_MIXED_PRECISION, the file's mixed_precision
// (TrainingArguments.__post_init__, transformers 5.25.0 l.1614-1618; the
// Accelerator takes args.mixed_precision, trainer.py l.744). Neither
// refuses a disagreement: the Trainer's wins.
//
// Under DeepSpeed the Trainer's own bf16 and fp16 stay as they are (its
// DeepSpeed config is checked against them, not against mixed_precision):
// the mixed precision returned is what the plugin's set_mixed_precision
// is given (hfAccelerateDeepSpeed).
func hfAccelerateMixedPrecision(t, a *tree, kind string) (string, error) {
	mp, err := a.str("mixed_precision", "no")
	if err != nil {
		return "", err
	}
	switch strings.ToLower(mp) {
	case "no", "bf16", "fp16":
	case "fp8":
		return "", a.errorf("mixed_precision", "bf16, fp16 or no (memsh models float8 as train(float8=...))", "accelerate's fp8 mixed precision is not modelled")
	default:
		return "", a.errorf("mixed_precision", "no, fp16, bf16 or fp8", "unknown mixed precision %s", quoteKey(mp))
	}
	bf16, err := t.boolean("bf16", false)
	if err != nil {
		return "", err
	}
	fp16, err := t.boolean("fp16", false)
	if err != nil {
		return "", err
	}
	mp = strings.ToLower(mp)
	switch {
	case fp16:
		return "fp16", nil
	case bf16:
		return "bf16", nil
	case mp != "no" && kind != "DEEPSPEED":
		hfAccelerateSet(t, mp, true, "mixed_precision")
	}
	return mp, nil
}

// hfAccelerateSet makes the Trainer read key as v, which the accelerate
// config's src decides: the Trainer's own value of key, in either
// spelling of an fsdp_config key, is read and replaced.
func hfAccelerateSet(t *tree, key string, v any, src string) {
	t.get(key)
	if name, ok := strings.CutPrefix(key, "fsdp_config."); ok {
		t.get("fsdp_config.fsdp_" + name)
	}
	t.leaves[key] = leaf{value: v}
	t.from[key] = "accelerate_config." + src
}

// hfAccelerateMerge lists the accelerate config's keys under
// accelerate_config.: read, of no effect for this distributed_type, or
// not understood.
func hfAccelerateMerge(t, a *tree, kind string) {
	for k, l := range a.leaves {
		key := "accelerate_config." + k
		t.leaves[key] = leaf{value: l.value}
		if a.used[k] || matchAny(k, hfAccelerateNoEffect) ||
			kind != "FSDP" && strings.HasPrefix(k, "fsdp_config.") || kind != "DEEPSPEED" && strings.HasPrefix(k, "deepspeed_config.") ||
			strings.HasPrefix(k, "megatron_lm_config.") {
			t.used[key] = true
		}
	}
	for _, n := range a.notModelled {
		t.notModelled = append(t.notModelled, "accelerate_config."+n)
	}
}

// hfAccelerateNoEffect are the accelerate config's keys that change
// nothing memsh replays: where the processes run, how they meet, what is
// saved (an fsdp_config key in either spelling: hfAccelerateFSDPKeys).
var hfAccelerateNoEffect = append([]string{
	"debug", "downcast_bf16", "enable_cpu_affinity", "gpu_ids", "machine_rank", "main_process_ip", "main_process_port",
	"main_training_function", "rdzv_backend", "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "tpu_name",
	"tpu_zone", "tpu_vm", "command_file", "commands", "mpirun_config.*", "dynamo_config.dynamo_mode",
	"dynamo_config.dynamo_use_fullgraph", "dynamo_config.dynamo_use_dynamic", "dynamo_config.dynamo_use_regional_compilation",
	// DeepSpeed's launcher, zero.Init at load time, what is saved, where NVMe lies
	"deepspeed_config.deepspeed_multinode_launcher", "deepspeed_config.deepspeed_hostfile", "deepspeed_config.deepspeed_exclusion_filter",
	"deepspeed_config.deepspeed_inclusion_filter", "deepspeed_config.zero3_init_flag", "deepspeed_config.zero3_save_16bit_model",
	"deepspeed_config.offload_optimizer_nvme_path", "deepspeed_config.offload_param_nvme_path",
}, hfAccelerateFSDPKeys(
	// saving, or a field FSDP2 drops (use_orig_params) or the launcher
	// never exports (limit_all_gathers, and backward_prefetch_policy, the
	// name accelerate read before fsdp_backward_prefetch)
	"state_dict_type", "use_orig_params", "transformer_layer_cls_to_wrap", "min_num_params", "limit_all_gathers", "backward_prefetch_policy",
)...)

// hfAccelerateFSDPKeys is each fsdp_config key in both of its spellings.
func hfAccelerateFSDPKeys(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "fsdp_config."+n, "fsdp_config.fsdp_"+n)
	}
	return out
}

// hfAccelerateKey is the accelerate config's key for an fsdp_config
// field: "fsdp_config.fsdp_NAME" (what `accelerate config` writes), or
// "fsdp_config.NAME", which the launcher prefixes (launch.py l.1320).
func hfAccelerateKey(a *tree, name string) string {
	if _, ok := a.leaves["fsdp_config."+name]; ok {
		return "fsdp_config." + name
	}
	return "fsdp_config.fsdp_" + name
}

// hfAccelerateFSDP is distributed_type FSDP. Without the Trainer's own
// fsdp, the Accelerator builds its plugin from the launcher's variables
// alone: FSDP1 unless fsdp_version says 2 (launch.py's default "1"),
// FULL_SHARD unless fsdp_sharding_strategy says otherwise (FSDP1) or
// fsdp_reshard_after_forward (FSDP2, true unless set), offload,
// NO_PREFETCH unless fsdp_backward_prefetch, sync_module_states and
// cpu_ram_efficient_loading (both true unless set). With the Trainer's
// fsdp, its plugin's fields win (the version, FSDP2's
// reshard_after_forward, FSDP1's prefetch and sync_module_states), except
// where the Trainer leaves one unset: cpu_offload when its fsdp has no
// offload, and FSDP1's sharding strategy, which the plugin reads from
// FSDP_SHARDING_STRATEGY (the launcher exports FULL_SHARD unless told) and
// prefers to the Trainer's reshard_after_forward (accelerator.py l.1919).
func hfAccelerateFSDP(t, a *tree) error {
	if v, _ := t.get("deepspeed"); v != nil {
		return a.errorf("distributed_type", "the Trainer runs one of them: drop the Trainer's deepspeed, or launch with a DEEPSPEED config", "FSDP, and the Trainer's deepspeed is set")
	}
	v, _ := t.get("fsdp")
	trainer := v != nil && v != "" && v != false
	if l, ok := v.([]any); ok && len(l) == 0 {
		trainer = false
	}
	version, err := a.integer(hfAccelerateKey(a, "version"), 1, 1, 2)
	if err != nil {
		return err
	}
	if trainer {
		if version, err = hfFSDPVersion(t); err != nil {
			return err
		}
	} else {
		hfAccelerateSet(t, "fsdp", "full_shard", "distributed_type")
		hfAccelerateSet(t, "fsdp_config.version", version, hfAccelerateKey(a, "version"))
	}
	if version == 1 {
		key := hfAccelerateKey(a, "sharding_strategy")
		s, err := a.str(key, "FULL_SHARD")
		if err != nil {
			return err
		}
		switch strings.ToUpper(s) {
		case "FULL_SHARD", "1":
			s = "full_shard"
		case "SHARD_GRAD_OP", "2":
			s = "shard_grad_op"
		case "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2", "3", "4", "5":
			return a.errorf(key, "FULL_SHARD or SHARD_GRAD_OP", "sharding strategy %s is not modelled", quoteKey(s))
		default:
			return a.errorf(key, "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or HYBRID_SHARD_ZERO2", "unknown sharding strategy %s", quoteKey(s))
		}
		hfAccelerateSet(t, "fsdp_config.reshard_after_forward", s, key)
		raf := hfAccelerateKey(a, "reshard_after_forward")
		if r, _ := a.get(raf); r != nil && !strings.EqualFold(fmt.Sprint(r), s) && !strings.EqualFold(fmt.Sprint(r), "true") {
			a.notModelled = append(a.notModelled, fmt.Sprintf("%s: FSDP1 runs %s's %s, which accelerate launch always exports and prefers "+
				"(accelerate 1.16 accelerator.py l.1919): this key changes nothing", raf, key, strings.ToUpper(s)))
		}
	} else {
		a.get(hfAccelerateKey(a, "sharding_strategy")) // FSDP1's only
	}
	if trainer { // the Trainer's plugin says these itself
		for _, k := range []string{"reshard_after_forward", "backward_prefetch", "sync_module_states", "cpu_ram_efficient_loading"} {
			a.get(hfAccelerateKey(a, k))
		}
	} else if err := hfAccelerateFSDPEnv(t, a, version); err != nil {
		return err
	}
	off := hfAccelerateKey(a, "offload_params")
	if offload, err := a.boolean(off, false); err != nil {
		return err
	} else if offload {
		hfAccelerateSet(t, "fsdp_config.cpu_offload", true, off)
	}
	return hfAccelerateFSDPUnmodelled(t, a, trainer, version)
}

// hfAccelerateFSDPEnv is what the Trainer without fsdp of its own leaves
// to the launcher's variables: FSDP2's reshard_after_forward, FSDP1's
// backward prefetch and sync_module_states.
func hfAccelerateFSDPEnv(t, a *tree, version int64) error {
	if version == 2 {
		key := hfAccelerateKey(a, "reshard_after_forward")
		r, err := a.boolean(key, true)
		if err != nil {
			return a.errorf(key, "true or false (FSDP2)", "want a bool, got %s", describe(a.leaves[key].value))
		}
		hfAccelerateSet(t, "fsdp_config.reshard_after_forward", r, key)
		a.get(hfAccelerateKey(a, "backward_prefetch")) // dropped for FSDP2, with a warning
		a.get(hfAccelerateKey(a, "sync_module_states"))
		a.get(hfAccelerateKey(a, "cpu_ram_efficient_loading"))
		return nil
	}
	key := hfAccelerateKey(a, "backward_prefetch")
	mode, err := a.str(key, "NO_PREFETCH")
	if err != nil {
		return err
	}
	switch strings.ToUpper(mode) {
	case "NO_PREFETCH", "BACKWARD_PRE", "BACKWARD_POST":
	default:
		return a.errorf(key, "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH", "unknown backward prefetch %s", quoteKey(mode))
	}
	hfAccelerateSet(t, "fsdp_config.backward_prefetch", mode, key)
	syncKey, ramKey := hfAccelerateKey(a, "sync_module_states"), hfAccelerateKey(a, "cpu_ram_efficient_loading")
	sync, err := a.boolean(syncKey, true)
	if err != nil {
		return err
	}
	ram, err := a.boolean(ramKey, true)
	if err != nil {
		return err
	}
	if ram && !sync { // utils/launch.py l.278-279
		return a.errorf(syncKey, "set it true, or cpu_ram_efficient_loading false", "false with cpu_ram_efficient_loading: accelerate launch refuses it")
	}
	hfAccelerateSet(t, "fsdp_config.sync_module_states", sync, syncKey)
	hfAccelerateSet(t, "fsdp_config.cpu_ram_efficient_loading", ram, ramKey)
	return nil
}

// hfAccelerateFSDPUnmodelled lists what the plugin does that memsh does not
// replay: FSDP's own activation checkpointing, ignored modules, and a wrap
// policy other than one unit a transformer layer; and, without the
// Trainer's fsdp, FSDP1's forward prefetch, which memsh replays.
func hfAccelerateFSDPUnmodelled(t, a *tree, trainer bool, version int64) error {
	key := hfAccelerateKey(a, "activation_checkpointing")
	act, err := a.boolean(key, false)
	if err != nil {
		return err
	}
	_, own := t.leaves["fsdp_config.activation_checkpointing"]
	if _, fsdpOwn := t.leaves["fsdp_config.fsdp_activation_checkpointing"]; fsdpOwn {
		own = true
	}
	if act && !(trainer && own) {
		for _, k := range []string{"activation_checkpointing", "gradient_checkpointing"} {
			if on, err := t.boolean(k, false); err != nil {
				return err
			} else if on { // trainer.py l.879-884
				return a.errorf(key, "drop the Trainer's "+k+", or this key", "true with the Trainer's %s: the Trainer refuses both", k)
			}
		}
		a.notModelled = append(a.notModelled, key+": FSDP's own checkpoint wrapper around each wrapped layer (memsh's checkpoint is the Trainer's gradient_checkpointing)")
	}
	a.notModelledIf(hfAccelerateKey(a, "activation_checkpointing_offload"), "the checkpointed layers' inputs in pinned host memory")
	a.notModelledIf(hfAccelerateKey(a, "ignored_modules"), "modules FSDP leaves unsharded")
	if trainer { // the Trainer's plugin says its own wrap policy and forward prefetch
		a.get(hfAccelerateKey(a, "auto_wrap_policy"))
		a.get(hfAccelerateKey(a, "forward_prefetch"))
		return nil
	}
	if version == 1 { // FSDP_FORWARD_PREFETCH, "false" unless set (launch.py l.575-580), read for FSDP1 only (dataclasses.py l.1828-1829)
		key := hfAccelerateKey(a, "forward_prefetch")
		forward, err := a.boolean(key, false)
		if err != nil {
			return err
		}
		hfAccelerateSet(t, "fsdp_config.forward_prefetch", forward, key)
	} else {
		a.get(hfAccelerateKey(a, "forward_prefetch"))
	}
	wrapKey := hfAccelerateKey(a, "auto_wrap_policy")
	wrap, err := a.str(wrapKey, "NO_WRAP")
	if err != nil {
		return err
	}
	switch strings.ToUpper(wrap) {
	case "TRANSFORMER_BASED_WRAP":
	case "NO_WRAP": // the plugin's default with no FSDP_AUTO_WRAP_POLICY (dataclasses.py l.1786)
		a.asked[wrapKey] = true
		a.notModelled = append(a.notModelled, wrapKey+": NO_WRAP (unset), the whole model one FSDP unit: memsh wraps each transformer layer")
	case "SIZE_BASED_WRAP":
		a.notModelled = append(a.notModelled, wrapKey+": SIZE_BASED_WRAP's units of at least fsdp_min_num_params: memsh wraps each transformer layer")
	default:
		return a.errorf(wrapKey, "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP", "unknown wrap policy %s", quoteKey(wrap))
	}
	return nil
}

// hfAccelerateDeepSpeedFields maps the accelerate config's deepspeed_config
// keys to the DeepSpeed config's (DeepSpeedPlugin.__post_init__'s
// plugin_to_config_mapping, accelerate 1.16 utils/dataclasses.py
// l.1177-1186), in a fixed order.
var hfAccelerateDeepSpeedFields = [][2]string{
	{"gradient_accumulation_steps", "gradient_accumulation_steps"},
	{"gradient_clipping", "gradient_clipping"},
	{"zero_stage", "zero_optimization.stage"},
	{"offload_optimizer_device", "zero_optimization.offload_optimizer.device"},
	{"offload_param_device", "zero_optimization.offload_param.device"},
}
