package importers

import (
	"strings"

	"github.com/memsh/memsh/sim/hf"
)

// The Trainer's data-parallel layout: DDP, or FSDP as the Trainer hands it
// to accelerate (hfLayout), and the FSDP fields its release and
// fsdp_config decide (version, resharding, prefetch, sync_module_states).

// hfFSDPOrigParams is fsdp_config's use_orig_params, in both spellings
// (the Trainer and accelerate strip fsdp_), which changes nothing memsh
// replays. FSDP2 always uses the original parameters: accelerate drops
// the field for it (utils/dataclasses.py l.1932-1934 at accelerate
// 16cb6eb). Under FSDP1 (FullyShardedDataParallel(use_orig_params=),
// accelerator.py l.1947) the original parameters are views into the
// FlatParameter either way, padded for address alignment (a few bytes
// each); the flat gradient covers the whole FlatParameter either way
// (sim/replay/fsdp1.go). What it permits is a FlatParameter mixing frozen
// and trainable parameters (_flat_param.py _validate_tensors_to_flatten,
// pytorch fe03cf6: with False, "Must flatten tensors with uniform
// requires_grad"); the Trainer wraps a PEFT model's adapters as units of
// their own (hfLayout), so its units never mix, and Axolotl's
// unfrozen_parameters say when they may (axolotlOrigParams).
var hfFSDPOrigParams = hfAccelerateFSDPKeys("use_orig_params")

// hfLayout is data parallelism over every GPU: DDP, or FSDP with the
// Trainer's fsdp option (full_shard, shard_grad_op, offload).
func hfLayout(t *tree, o Options, p *plan) error {
	v, _ := t.get("fsdp")
	var opts []string
	switch x := v.(type) {
	case nil:
	case string:
		opts = strings.Fields(x)
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return t.errorf("fsdp", "", "want a list of options, got an item %s", describe(e))
			}
			opts = append(opts, s)
		}
	case bool:
		release, major, err := hfTransformers(t)
		if err != nil {
			return err
		}
		if x && major == 4 {
			return t.errorf("fsdp", "full_shard auto_wrap", "say which sharding (fsdp: true is transformers 5's, with memsh.transformers=%s)", release)
		}
		if x { // transformers 5: FSDP on, configured by fsdp_config (training_args.py 5.25.0 l.2903)
			opts = []string{"full_shard", "auto_wrap"}
		}
	default:
		return t.errorf("fsdp", "full_shard auto_wrap", "want options, got %s", describe(v))
	}
	version, err := hfFSDPVersion(t)
	if err != nil {
		return err
	}
	fsdp, offload, keep := false, false, false
	for _, opt := range opts {
		switch opt {
		case "full_shard":
			fsdp = true
		case "shard_grad_op": // parameters kept gathered from the forward to the backward
			fsdp, keep = true, true
		case "offload":
			offload = true
		case "auto_wrap":
		case "hybrid_shard", "hybrid_shard_zero2", "no_shard":
			return t.errorf("fsdp", "memsh replays full_shard and shard_grad_op", "%s is not modelled", quoteKey(opt))
		default:
			return t.errorf("fsdp", "full_shard, shard_grad_op, hybrid_shard, offload, auto_wrap", "unknown option %s", quoteKey(opt))
		}
	}
	if fsdp {
		// fsdp_config's cpu_offload, which the legacy offload option sets
		// (training_args.py 5.25.0 l.2830-2831)
		on, err := t.boolean(hfFSDPKey(t, "cpu_offload"), false)
		if err != nil {
			return err
		}
		offload = offload || on
		if keep, err = hfReshardAfterForward(t, version, keep); err != nil {
			return err
		}
		if v, _ := t.get(hfFSDPKey(t, "version")); v == nil { // the release decides (hfFSDPVersion): say which was assumed
			if release, _, _ := hfTransformers(t); release == "" {
				t.notModelled = append(t.notModelled, "fsdp_config.version: unset, so transformers 5.10 and later run FSDP2 "+
					"(4.x and 5.0-5.9 FSDP1: memsh.transformers=4.57.1 says a 4.x run, or set fsdp_config.version)")
			}
		}
	}
	gpus := o.GPUs * o.Nodes
	if gpus == 1 && !fsdp {
		return nil
	}
	args := []string{kw("dp", num(gpus))}
	if fsdp {
		args = append(args, kw("fsdp", num(version)))
	}
	if keep {
		args = append(args, kw("reshard_after_forward", "False"))
	}
	// accelerate sets FSDP's mixed-precision policy from the Trainer's bf16
	// or fp16: param_dtype and reduce_dtype both that dtype, FSDP1 and
	// FSDP2 alike (AcceleratorState calls fsdp_plugin.set_mixed_precision,
	// accelerate 1.16 state.py l.975-976; utils/dataclasses.py
	// l.2008-2013). memsh's FSDP1 reduces in param_dtype already, and its
	// param_dtype is the autocast dtype; FSDP2's reduce_dtype defaults to
	// the gradients' dtype (torchtitan's fp32), so over fp32 weights the
	// Trainer's is said.
	if fsdp && version == 2 {
		switch p.value("precision") {
		case str("bf16-mixed"):
			args = append(args, kw("reduce_dtype", str("bf16")))
		case str("fp16-mixed"):
			args = append(args, kw("reduce_dtype", str("fp16")))
		}
	}
	// A PEFT model under FSDP is wrapped by peft's fsdp_auto_wrap_policy,
	// every adapter a unit of its own (Trainer._fsdp_qlora_plugin_updates,
	// transformers 4.57.1 trainer.py l.5577-5583); with quantized weights
	// memsh wraps them so already.
	peft, err := t.boolean("use_peft", false)
	if err != nil {
		return err
	}
	if fsdp && version == 1 && peft && !p.quantized() {
		args = append(args, kw("fsdp_adapter_units", "True"))
	}
	if fsdp && version == 1 {
		sync, err := hfSyncModuleStates(t)
		if err != nil {
			return err
		}
		if sync {
			args = append(args, kw("fsdp_sync_module_states", "True"))
		}
	}
	if fsdp {
		mode, err := hfBackwardPrefetch(t)
		if err != nil {
			return err
		}
		if version == 1 { // accelerate drops backward_prefetch for FSDP2, with a warning
			args = append(args, kw("fsdp_backward_prefetch", str(mode)))
		}
		// FSDP1's forward_prefetch: fsdp_config's, false unless set
		// (transformers 5.25.0 training_args.py l.2872-2874); the Trainer
		// passes none for FSDP2, whose plugin leaves it unset.
		forward, err := t.boolean(hfFSDPKey(t, "forward_prefetch"), false)
		if err != nil {
			return err
		}
		if version == 1 && forward {
			args = append(args, kw("fsdp_forward_prefetch", "True"))
		}
	}
	// The Trainer accumulates inside accelerator.no_sync() unless
	// accelerator_config's gradient_accumulation_kwargs sets
	// sync_each_batch (accelerate's GradientAccumulationPlugin): then
	// FSDP1 reduce-scatters every micro-batch.
	each, err := t.boolean("accelerator_config.gradient_accumulation_kwargs.sync_each_batch", false)
	if err != nil {
		return err
	}
	accum, err := t.integer("gradient_accumulation_steps", 1, 1, 1<<24)
	if err != nil {
		return err
	}
	if fsdp && version == 1 && each && accum > 1 {
		if offload {
			// _flat_param.py prepare_gradient_for_backward (pytorch/pytorch
			// fe03cf693c): "Gradient accumulation outside `no_sync()` does
			// not work with CPU offloading" (sim/core/offload.go).
			return t.errorf("accelerator_config.gradient_accumulation_kwargs.sync_each_batch",
				"set it false (the Trainer's no_sync() accumulation), or drop offload from fsdp",
				"FSDP1 with offload (fsdp: ... offload) accumulates gradients inside no_sync() only; PyTorch refuses accumulation outside it with CPU offloading")
		}
		args = append(args, kw("fsdp_sync_each_batch", "True"))
	}
	// FSDP2 under accelerate 1.11.0 and later accumulates without
	// gradient sync unless sync_each_batch: accumulate() calls
	// set_requires_gradient_sync(False) on the micro-batches that do not
	// step (accelerator.py no_sync at v1.14.0, beb0672aa8; ec92b1af7a),
	// parallel(fsdp_no_sync=True). DDP there all-reduces every
	// micro-batch with sync_each_batch; memsh all-reduces once a step, as
	// under no_sync().
	switch {
	case accum <= 1:
	case !fsdp && each:
		t.notModelled = append(t.notModelled, "accelerator_config.gradient_accumulation_kwargs.sync_each_batch: DDP's all-reduce of every micro-batch "+
			"(memsh all-reduces once a step, as under accelerate's no_sync(): the communication time is under-counted)")
	case fsdp && version == 2 && !each && offload:
		t.notModelled = append(t.notModelled, "fsdp_config.fsdp_version: accelerate 1.11.0 and later accumulate FSDP2 gradients unsharded "+
			"(set_requires_gradient_sync(False)); with offload memsh reduce-scatters every micro-batch instead (fsdp_no_sync is not modelled with CPU offload)")
	case fsdp && version == 2 && !each:
		args = append(args, kw("fsdp_no_sync", "True"))
	}
	p.set("parallel", call("parallel", args...))
	if offload {
		p.offload(kw("params", str("cpu")))
	}
	p.cluster(o)
	return nil
}

// hfSyncModuleStates is FSDP1's sync_module_states as the Trainer passes
// it to accelerate: fsdp_config's sync_module_states, true unless set
// (transformers 5.17 training_args.py l.2837-2839, the "fsdp_" prefix of
// a key dropped first, l.2744), forced on by cpu_ram_efficient_loading
// (accelerate 1.16 utils/dataclasses.py l.1858-1863). FSDP then
// broadcasts rank 0's parameters while it wraps the model
// (parallel(fsdp_sync_module_states=True), replay/fsdp1_wrap.go).
func hfSyncModuleStates(t *tree) (bool, error) {
	sync, err := t.boolean(hfFSDPKey(t, "sync_module_states"), true)
	if err != nil {
		return false, err
	}
	ram, err := t.boolean(hfFSDPKey(t, "cpu_ram_efficient_loading"), false)
	return sync || ram, err
}

// hfFSDPVersion is the FSDP the Trainer asks accelerate for:
// fsdp_config's version (or fsdp_version, its "fsdp_" prefix dropped), 2
// unless set from transformers 5.10.0 (training_args.py 5.10.0 l.2736,
// 5.25.0 l.2826; 5.9.0 l.2812 and earlier 5.x: 1), 1 under transformers
// 4.x (accelerate's FullyShardedDataParallelPlugin default).
func hfFSDPVersion(t *tree) (int64, error) {
	release, major, err := hfTransformers(t)
	if err != nil {
		return 0, err
	}
	def := int64(2)
	if major == 4 || release != "" && !hf.ReleaseAtLeast(release, 5, 10) {
		def = 1
	}
	return t.integer(hfFSDPKey(t, "version"), def, 1, 2)
}

// hfReshardAfterForward says whether FSDP keeps the parameters gathered
// from the forward to the backward: transformers 5's fsdp_config
// reshard_after_forward, for FSDP2 a bool (true unless set), for FSDP1
// the sharding strategy ("full_shard" unless set; "shard_grad_op"
// keeps them), which the legacy fsdp option sets only when the key is
// absent (setdefault, training_args.py 5.25.0 l.2916-2932); legacy says
// the fsdp option was shard_grad_op.
func hfReshardAfterForward(t *tree, version int64, legacy bool) (bool, error) {
	keep, err := hfTrainerReshard(t, version, legacy)
	if err != nil || !keep || version != 1 {
		return keep, err
	}
	// accelerate 1.16 builds FSDP1 with its plugin's sharding_strategy, read
	// from FSDP_SHARDING_STRATEGY (FULL_SHARD unless the launcher exports
	// another), before the Trainer's reshard_after_forward (accelerator.py
	// l.1919: sharding_strategy or reshard_after_forward): under
	// transformers 5, which passes the strategy only as
	// reshard_after_forward, FSDP1 runs FULL_SHARD unless an accelerate
	// config says SHARD_GRAD_OP (accelerate_config=, hf_accelerate.go).
	// Transformers 4.x exports the variable itself (4.57.1
	// training_args.py l.2011-2016).
	key := hfFSDPKey(t, "reshard_after_forward")
	_, major, err := hfTransformers(t)
	if err != nil {
		return false, err
	}
	if major == 4 || strings.HasPrefix(t.from[key], "accelerate_config.") {
		return true, nil
	}
	said := key
	if legacy {
		said = "fsdp"
	}
	t.notModelled = append(t.notModelled, said+": shard_grad_op under FSDP1 changes nothing with transformers 5: accelerate 1.16 runs FSDP_SHARDING_STRATEGY's "+
		"FULL_SHARD (accelerator.py l.1919), which memsh replays; an accelerate config's fsdp_sharding_strategy SHARD_GRAD_OP (accelerate_config=) keeps the parameters gathered")
	return false, nil
}

// hfTrainerReshard is what the Trainer's own keys say of resharding
// (hfReshardAfterForward).
func hfTrainerReshard(t *tree, version int64, legacy bool) (bool, error) {
	key := hfFSDPKey(t, "reshard_after_forward")
	v, _ := t.get(key)
	switch x := v.(type) {
	case nil:
		return legacy, nil
	case bool:
		if version == 1 {
			return false, t.errorf(key, "full_shard or shard_grad_op", "FSDP1's reshard_after_forward is its sharding strategy, got %v", x)
		}
		return !x, nil
	case string:
		switch strings.ToLower(x) {
		case "true", "full_shard", "1":
			return false, nil
		case "false", "shard_grad_op", "2":
			return true, nil
		case "hybrid_shard", "hybrid_shard_zero2", "no_shard":
			return false, t.errorf(key, "full_shard or shard_grad_op", "sharding strategy %s is not modelled", quoteKey(x))
		}
	}
	return false, t.errorf(key, "true or false (FSDP2), full_shard or shard_grad_op (FSDP1)", "want a sharding, got %s", describe(v))
}

// hfFSDPKey is the key the Trainer reads fsdp_config's name from: the key
// itself, else its "fsdp_"-prefixed spelling (the prefix dropped,
// training_args.py l.2744 at transformers 5.17).
func hfFSDPKey(t *tree, name string) string {
	if _, ok := t.get("fsdp_config." + name); ok {
		return "fsdp_config." + name
	}
	return "fsdp_config.fsdp_" + name
}

// hfBackwardPrefetch is FSDP1's backward_prefetch as the Trainer passes it
// to accelerate: fsdp_config's backward_prefetch, "NO_PREFETCH" unless set
// (transformers 4.57.1 training_args.py l.2028-2029, 5.25.0 l.2875),
// which accelerate's FullyShardedDataParallelPlugin turns into
// backward_prefetch=None (accelerate 1.16 utils/dataclasses.py
// l.1767-1777): each unit gathered by its own pre-backward, where
// FullyShardedDataParallel's own default is BACKWARD_PRE
// (parallel(fsdp_backward_prefetch=...), core/fsdp.go).
func hfBackwardPrefetch(t *tree) (string, error) {
	key := hfFSDPKey(t, "backward_prefetch")
	s, err := t.str(key, "NO_PREFETCH")
	if err != nil {
		return "", err
	}
	switch strings.ToUpper(s) {
	case "NO_PREFETCH":
		return "none", nil
	case "BACKWARD_PRE":
		return "pre", nil
	case "BACKWARD_POST":
		return "post", nil
	}
	return "", t.errorf(key, "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH", "unknown backward prefetch %s", quoteKey(s))
}
