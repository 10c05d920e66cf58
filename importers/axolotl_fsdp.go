package importers

import (
	"fmt"
	"strings"
)

// axolotlFSDP is Axolotl's FSDP as the hf importer's fsdp and fsdp_config
// say it (at axolotl 067b021c8): FSDP runs when fsdp or fsdp_config is set
// (loaders/model.py l.157-160); its version is fsdp_version, or
// fsdp_config's fsdp_version or version, else 1 (schemas/validation.py
// l.1105-1123); fsdp_config's keys lose a leading fsdp_ (l.1083-1102).
// The Trainer gets fsdp (full_shard when only fsdp_config is set,
// core/builders/base.py l.684-686) and fsdp_config, and accelerate the
// FSDP_* variables setup_fsdp_envs sets (utils/trainer.py l.591-622):
// offload_params offloads the parameters to the CPU. It returns the
// version, 0 without FSDP. QLoRA runs under FSDP1 only: memsh does not
// replay bitsandbytes' 4-bit weights under FSDP2's fully_shard.
func axolotlFSDP(t *tree, adapter string) (int64, error) {
	if !t.hasUnder("fsdp") && !t.hasUnder("fsdp_config") && !t.has("fsdp_version") {
		return 0, nil
	}
	key := func(name string) string { // fsdp_config.name, or its fsdp_-prefixed spelling
		if k := "fsdp_config.fsdp_" + name; t.has(k) && !t.has("fsdp_config."+name) {
			return k
		}
		return "fsdp_config." + name
	}
	version, from := int64(0), ""
	for _, k := range []string{"fsdp_version", "fsdp_config.fsdp_version", "fsdp_config.version"} {
		if t.has(k) && from == "" {
			v, err := t.integer(k, 1, 1, 2)
			if err != nil {
				return 0, err
			}
			version, from = v, k
		}
	}
	if from == "" {
		version, from = 1, "fsdp_config"
	}
	offload, err := t.boolean(key("offload_params"), false)
	if err != nil {
		return 0, err
	}
	opts := []string{"full_shard", "auto_wrap"}
	if list, err := t.strs("fsdp"); err != nil {
		return 0, err
	} else if list != nil {
		opts = nil
		for _, o := range list {
			switch o {
			case "full_shard", "auto_wrap":
			case "offload":
				offload = true
				continue
			default:
				return 0, t.errorf("fsdp", "full_shard, auto_wrap, offload", "%s is not modelled", quoteKey(o))
			}
			opts = append(opts, o)
		}
	}
	if offload {
		opts = append(opts, "offload")
	}
	if v, _ := t.get(key("mixed_precision_policy")); v != nil && v != false {
		return 0, t.errorf(key("mixed_precision_policy"), "leave it out, or write the plan in Starlark", "not modelled: an FSDP2 mixed-precision policy of its own")
	}
	// FSDP's own activation checkpointing: setup_fsdp_envs sets
	// FSDP_ACTIVATION_CHECKPOINTING (utils/trainer.py l.597), and the plugin
	// wraps each decoder layer in checkpoint_wrapper with NO_REENTRANT before
	// fully_shard (monkeypatch/accelerate/fsdp2.py l.587-601; accelerate
	// alike for FSDP1): memsh's non-reentrant checkpointing of every layer
	// (tools/oracle/fsdp1_prefetch.py holds it to checkpoint_wrapper under
	// FSDP1). The Trainer refuses it beside its own gradient checkpointing
	// (transformers 5.25.0 trainer.py l.879-884).
	if on, err := t.boolean(key("activation_checkpointing"), false); err != nil {
		return 0, err
	} else if on {
		if gc, _ := t.get("gradient_checkpointing"); gc != nil && gc != false {
			return 0, t.errorf(key("activation_checkpointing"), "keep one: gradient_checkpointing: false, or this key false",
				"FSDP's activation checkpointing and gradient_checkpointing are both set: the Trainer refuses both")
		}
		t.derive("gradient_checkpointing", true, key("activation_checkpointing"))
		t.derive("gradient_checkpointing_kwargs.use_reentrant", false, key("activation_checkpointing"))
	}
	if v, _ := t.get(key("reshard_after_forward")); v == false {
		return 0, t.errorf(key("reshard_after_forward"), "leave it out (FSDP reshards after forward by default)", "parameters kept unsharded between forward and backward are not modelled")
	}
	if p, err := t.str(key("auto_wrap_policy"), "TRANSFORMER_BASED_WRAP"); err != nil {
		return 0, err
	} else if p != "TRANSFORMER_BASED_WRAP" {
		return 0, t.errorf(key("auto_wrap_policy"), "TRANSFORMER_BASED_WRAP: a unit a decoder layer, as memsh wraps", "policy %s is not modelled", quoteKey(p))
	}
	if s, err := t.str(key("sharding_strategy"), "FULL_SHARD"); err != nil {
		return 0, err
	} else if s != "FULL_SHARD" && s != "1" {
		return 0, t.errorf(key("sharding_strategy"), "FULL_SHARD", "sharding strategy %s is not modelled", quoteKey(s))
	}
	// FSDP1's limit_all_gathers, on by default (torch's
	// FullyShardedDataParallel): what memsh replays
	if on, err := t.boolean(key("limit_all_gathers"), true); err != nil {
		return 0, err
	} else if !on {
		t.notModelled = append(t.notModelled, key("limit_all_gathers")+": FSDP1's all-gathers issued without its rate limiter (more unsharded layers at once): memsh replays the limiter's")
	}
	if version == 2 && adapter == "qlora" {
		return 0, t.errorf(from, "fsdp_version: 1 (FSDP-QLoRA as accelerate's FSDP1 runs it), or write the plan in Starlark",
			"bitsandbytes' 4-bit weights under FSDP2 (fully_shard) are not modelled")
	}
	if version == 2 {
		t.notModelledIf(key("cpu_ram_efficient_loading"), "FSDP2 loads the weights on rank 0 and broadcasts them while it wraps the model: memsh replays the step, not the loading")
	}
	t.derive("fsdp", strings.Join(opts, " "), "fsdp")
	t.derive("fsdp_config.fsdp_version", version, from)
	return version, nil
}

// axolotlFSDPNoEffect are fsdp_config's keys that change nothing memsh
// replays: how checkpoints are saved, the decoder layer's class (memsh
// wraps each decoder layer), pinned host memory for offload.
var axolotlFSDPNoEffect = func() []string {
	var out []string
	for _, k := range []string{"state_dict_type", "final_state_dict_type", "transformer_layer_cls_to_wrap", "cpu_offload_pin_memory"} {
		out = append(out, "fsdp_config."+k, fmt.Sprintf("fsdp_config.fsdp_%s", k))
	}
	return append(out, hfFSDPOrigParams...)
}()

// axolotlOrigParams warns of unfrozen_parameters (trainable, not "")
// under FSDP1 without use_orig_params (Axolotl sets FSDP_USE_ORIG_PARAMS
// only when it is true, utils/trainer.py setup_fsdp_envs, and accelerate's
// FSDP1 default is False): torch refuses a wrapped unit (a decoder layer,
// the root) whose parameters are partly frozen, which memsh does not
// check; Axolotl refuses its Spectrum plugin so for the same reason
// (integrations/spectrum/args.py check_fsdp_use_orig_params).
func axolotlOrigParams(t *tree, version int64, trainable string) error {
	if version != 1 || trainable == "" {
		return nil
	}
	key := "fsdp_config.use_orig_params"
	if !t.has(key) && t.has("fsdp_config.fsdp_use_orig_params") {
		key = "fsdp_config.fsdp_use_orig_params"
	}
	on, err := t.boolean(key, false)
	if err != nil || on {
		return err
	}
	t.notModelled = append(t.notModelled, key+": false (FSDP1's default) with unfrozen_parameters: torch refuses a wrapped unit whose parameters are partly frozen "+
		"(\"Must flatten tensors with uniform requires_grad when use_orig_params=False\"), which memsh does not check: set it true, "+
		"and each unit's gradient covers its frozen parameters too, as memsh replays")
	return nil
}
