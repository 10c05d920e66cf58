package importers

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// deepspeedMaster reads DeepSpeed's low-precision master options
// (runtime/precision_config.py at edaa722, docs/_pages/config-json.md
// "bf16:bf16_master_weights_and_grads"): bf16.bf16_master_weights_and_grads
// keeps the ZeRO optimizer's master partition and its gradients in bf16,
// bf16.bf16_optimizer_states its moments too, fp16.fp16_master_weights_and_grads
// the master in fp16 (moments fp32, on the host: ZeRO-Offload only). It
// returns precision()'s keywords beyond the policy (master=, optimizer_states=)
// and the key that set them, checking what config.py asserts: ZeRO stages
// 1 to 3 only, bf16 moments with a bf16 master only. That a 16-bit master
// with fp32 moments needs offload_optimizer is the plan's check
// (sim/core/zero_precision.go), named by the key.
func deepspeedMaster(t *tree, fp16, bf16 bool) (args []string, key string, err error) {
	section := "bf16"
	if _, ok := t.leaves["bfloat16.bf16_master_weights_and_grads"]; ok {
		section = "bfloat16" // DeepSpeed's older name of the section
	}
	bfMaster, err := t.boolean(section+".bf16_master_weights_and_grads", false)
	if err != nil {
		return nil, "", err
	}
	bfStates, err := t.boolean(section+".bf16_optimizer_states", false)
	if err != nil {
		return nil, "", err
	}
	fpMaster, err := t.boolean("fp16.fp16_master_weights_and_grads", false)
	if err != nil {
		return nil, "", err
	}
	stage, err := t.integer("zero_optimization.stage", 0, 0, 3)
	if err != nil {
		return nil, "", err
	}
	type option struct {
		key     string
		on, fit bool // set; and under the mode it belongs to
		dtype   string
	}
	for _, o := range []option{
		{"fp16.fp16_master_weights_and_grads", fpMaster, fp16, "fp16"},
		{section + ".bf16_master_weights_and_grads", bfMaster, bf16, "bf16"},
		{section + ".bf16_optimizer_states", bfStates, bf16, "bf16"},
	} {
		switch {
		case !o.on:
			continue
		case !o.fit:
			return nil, "", t.errorf(o.key, strings.SplitN(o.key, ".", 2)[0]+".enabled=true, or drop it", "is set without %s training (the master copy follows the model's 16-bit dtype)", o.dtype)
		case stage == 0:
			return nil, "", t.errorf(o.key, "zero_optimization.stage 1, 2 or 3", "needs a ZeRO optimizer: DeepSpeed asserts it at stage 0")
		}
		key = o.key
	}
	switch {
	case bfStates && !bfMaster:
		return nil, "", t.errorf(section+".bf16_optimizer_states", section+".bf16_master_weights_and_grads=true beside it", "needs bf16 master weights: DeepSpeed asserts bf16_optimizer_states requires bf16_master_weights_and_grads")
	case bfMaster:
		args = append(args, kw("master", str("bf16")))
		if bfStates {
			args = append(args, kw("optimizer_states", str("bf16")))
		}
	case fpMaster:
		args = append(args, kw("master", str("fp16")))
	}
	return args, key, nil
}

// deepspeedAutocast reads the torch_autocast section (runtime/config.py
// get_torch_autocast_enabled; runtime/torch_autocast.py): engine.forward
// runs under torch.autocast, over the model as bf16.enabled/fp16.enabled
// leave it. memsh replays the 16-bit model without autocast's fp32 op list
// (layer_norm, softmax and the loss in fp32), so enabled is listed as not
// modelled; its dtype and lower_precision_safe_modules (the gradients'
// reduction dtype per module) go with it.
func deepspeedAutocast(t *tree) error {
	on, err := t.boolean("torch_autocast.enabled", false)
	if err != nil {
		return err
	}
	if !on {
		for _, k := range []string{"torch_autocast.dtype", "torch_autocast.lower_precision_safe_modules"} {
			t.get(k) // read: without autocast they change nothing
		}
		return nil
	}
	t.notModelledUnder("torch_autocast", "torch.autocast over the model (DeepSpeed's engine.forward): its fp32 ops (layer_norm, softmax, the loss) are replayed in the model's dtype")
	return nil
}

// deepspeedDataTypes reads the data_types section (runtime/config.py
// l.896-901, DtypeEnum's spellings): param_dtype must be the enabled
// mode's dtype (engine.py _assert_valid_mixed_precision_config), so it
// says nothing new; buffer_dtype casts the module's buffers (a rotary
// table's few KB). grad_accum_dtype other than the model's (fp32 in bf16
// mode: OpenRLHF's get_train_ds_config, Megatron-DeepSpeed's scripts)
// is returned as precision(grads=) (sim/core/zero_precision.go says what
// each stage does with it): DeepSpeed raises without ZeRO
// (_do_optimizer_sanity_check: "unsupported mix"), reads it nowhere at
// stage 2 with offload_optimizer (nothing to write), and at stage 1 runs
// BF16_Optimizer (a bf16 model, the optimizer on the GPU: replayed) or
// keeps a grad_accum copy of each parameter, which memsh does not replay:
// listed, as is an accumulation dtype other than fp32.
func deepspeedDataTypes(t *tree, model string) (grads string, err error) {
	dtype := func(key string) (string, error) {
		s, err := t.str(key, "")
		if err != nil || s == "" {
			return "", err
		}
		// DtypeEnum's spellings are units.ParseDType's (lower case), "torch." before them allowed
		d, err := units.ParseDType(strings.TrimPrefix(s, "torch."))
		if err == nil && (d == units.FP32 || d == units.BF16 || d == units.FP16) && strings.ToLower(s) == s {
			return d.String(), nil
		}
		return "", t.errorf(key, "fp32, bf16 or fp16 (DeepSpeed's DtypeEnum)", "unknown dtype %s", quoteKey(s))
	}
	if p, err := dtype("data_types.param_dtype"); err != nil {
		return "", err
	} else if p != "" && p != model {
		return "", t.errorf("data_types.param_dtype", "the enabled mode's dtype ("+model+"), or leave it out",
			"%s conflicts with the model's %s: DeepSpeed asserts they match", p, model)
	}
	if _, err := dtype("data_types.buffer_dtype"); err != nil {
		return "", err
	}
	const key = "data_types.grad_accum_dtype"
	g, err := dtype(key)
	if err != nil || g == "" || g == model {
		return "", err
	}
	stage, err := t.integer("zero_optimization.stage", 0, 0, 3)
	if err != nil {
		return "", err
	}
	offloaded, err := deepspeedOffloadsOptimizer(t)
	if err != nil {
		return "", err
	}
	unreplayed := func(what string) (string, error) {
		t.notModelled = append(t.notModelled, fmt.Sprintf("%s: gradients accumulated in %s beside the %s model (%s), replayed in the model's dtype", key, g, model, what))
		return "", nil
	}
	switch {
	case stage == 0:
		return "", t.errorf(key, "zero_optimization.stage 1, 2 or 3, or the model's dtype ("+model+")",
			"%s beside the %s model without ZeRO: DeepSpeed raises NotImplementedError (unsupported mix of model_dtype and grad_accum_dtype)", g, model)
	case g != "fp32" || model == "fp32":
		return unreplayed("an accumulation dtype DeepSpeed's optimizers take but memsh does not replay")
	case stage == 2 && offloaded:
		return "", nil // stage 2's host buffers follow the model and the master: nothing changes
	case stage == 1 && (model != "bf16" || offloaded):
		return unreplayed("stage 1 keeps a grad_accum copy of each parameter: use_grad_accum_attribute")
	}
	return g, nil // stage 1: BF16_Optimizer (sim/replay/zero_accum.go)
}

// deepspeedOffloadsOptimizer reports whether the ZeRO optimizer runs on
// the host: offload_optimizer.device cpu or nvme, or the deprecated
// cpu_offload (deepspeedZero reads and checks them).
func deepspeedOffloadsOptimizer(t *tree) (bool, error) {
	d, err := t.str("zero_optimization.offload_optimizer.device", "none")
	if err != nil {
		return false, err
	}
	legacy, err := t.boolean("zero_optimization.cpu_offload", false)
	return d != "none" || legacy, err
}
