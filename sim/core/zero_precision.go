package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// DeepSpeed's ZeRO optimizers (parallel(zero=1..3)) hold the model in one
// dtype and step a master partition of their own (deepspeedai/DeepSpeed
// at edaa722):
//
//   - bf16.enabled / fp16.enabled cast the model to the 16-bit dtype
//     (engine.py _configure_distributed_model); DeepSpeed does not use
//     torch.autocast for them, so an autocast policy ("bf16-mixed") runs
//     with 16-bit parameters and gradients.
//   - The master partition is in master_weights_and_grads_dtype
//     (base_optimizer.py _configure_master_weights): fp32, or bf16 with
//     bf16.bf16_master_weights_and_grads, fp16 with
//     fp16.fp16_master_weights_and_grads. precision(master=...) says it;
//     an autocast policy ("bf16-mixed") defaults it to fp32. A pure
//     policy (fp32, bf16, fp16) without master= keeps no master copy in
//     memsh (ZeroMaster: fp32 for the step's gradient copy and the
//     host's state), which DeepSpeed has no config for: its
//     low-precision master is precision("bf16-mixed", master="bf16",
//     optimizer_states="bf16").
//   - It is a copy even in the parameters' dtype: stages 1 and 2 clone
//     the 16-bit partition (stage_1_and_2.py l.492, .clone().to(dtype));
//     stage 3 aliases it only when the partition's device equals
//     self.device (stage3.py _create_fp32_partitions, since #7700), which
//     is the accelerator's device name, a string ('cuda:0',
//     current_device_name): a torch.device never equals a string, so on
//     CUDA it clones too. DeepSpeedExamples' bf16_master_weight run
//     measures it (sim/calib_deepspeed_bf16_master_test.go).
//   - The optimizer's moments are made like the master partition
//     (FusedAdam's zeros_like): on the GPU they are in its dtype, so
//     bf16_optimizer_states needs bf16_master_weights_and_grads (config.py
//     asserts it) and a 16-bit master with fp32 moments needs ZeRO-Offload
//     (DeepSpeedCPUAdam keeps fp32 moments on the host: the offload
//     validators of both optimizers).
//   - data_types.grad_accum_dtype (engine.py get_data_types, l.1485-1496:
//     the model's dtype unless set) is the policy's grads where they
//     differ from its params: precision(params="bf16", grads="fp32",
//     master="fp32") is bf16 mode with fp32 accumulation (OpenRLHF's
//     get_train_ds_config). Autograd still makes each .grad in the
//     parameter's dtype; the optimizers' own buffers take the accumulation
//     dtype: ZeRO-3's grad_partitions_flat_buffer (stage3.py l.741-743,
//     the reduce-scatter in communication_data_type, then each partition
//     cast: __avg_scatter_grads l.1825-1826), stage 2's zeros of the
//     parameters the step does not reach (get_all_grad_tensors, l.2106-2114;
//     its grads_in_partition stays in the model's dtype, l.1678-1680, and a
//     later micro-batch is added into the first one's), stage 1's
//     BF16_Optimizer (engine.py _do_optimizer_sanity_check l.1994-1997:
//     bf16, fp32 accumulation, no offload; ZeroBF16Optimizer: an fp32
//     copy of the whole flat model's gradients, sim/replay/zero_accum.go;
//     its master partition is fp32 whatever bf16_master_weights_and_grads:
//     a 16-bit one refused). Stage 2 with offload_optimizer reads it
//     nowhere (its host buffers follow the model and the master:
//     DeepspeedPrecision drops it); stage 1 with fp16 or offload keeps a
//     grad_accum copy of each parameter (use_grad_accum_attribute,
//     stage_1_and_2.py l.357-364), which memsh does not replay: refused.

// DeepspeedPrecision is the plan as DeepSpeed's ZeRO runs its precision
// (the rules above): parameters and gradients in the compute dtype under
// an autocast policy, the master partition's dtype set and cloned
// (Precision.MasterClone). It reports false when nothing changes: the
// plan is not ZeRO's, was rewritten already, or holds its dtypes as
// DeepSpeed does (a pure policy, or a master in another dtype).
func (p *Plan) DeepspeedPrecision() (*Plan, bool) {
	prec := p.Precision
	same := prec.Master != units.InvalidDType && prec.Master == prec.Params // a copy only DeepSpeed makes
	unread := p.zeroAccumUnread()
	if (prec.MasterClone || !prec.Autocast && !same) && !unread || p.Parallel.Norm().Zero == 0 { // the layout's normal form last: the search asks for every layout
		return nil, false
	}
	q := *p
	if !prec.MasterClone && (prec.Autocast || same) {
		q.Precision = DeepspeedPolicy(prec)
	}
	if unread {
		q.Precision.Grads = q.Precision.Params
	}
	return &q, true
}

// zeroAccumUnread reports whether the plan accumulates gradients in
// another dtype than the model's where DeepSpeed reads no
// grad_accum_dtype: stage 2 with offload_optimizer (stage_1_and_2.py
// reads gradient_accumulation_dtype only where cpu_offload is off,
// independent_gradient_partition_epilogue l.935-952, and for stage 1's
// grad_accum attribute).
func (p *Plan) zeroAccumUnread() bool {
	prec := p.Precision
	return !prec.Autocast && !prec.Megatron && prec.Grads != prec.Params &&
		p.Offload != nil && p.Offload.Optimizer != "" && p.Parallel.Norm().Zero == 2
}

// ZeroGradAccum reports whether DeepSpeed's ZeRO accumulates the
// gradients in another dtype (Grads, data_types.grad_accum_dtype) than
// the model's, which autograd makes them in.
func (p Precision) ZeroGradAccum() bool {
	return !p.Megatron && p.Grads != p.Params
}

// ZeroBF16Optimizer reports whether DeepSpeed runs the plan's ZeRO stage
// 1 as its BF16_Optimizer: a bf16 model accumulating in fp32, the
// optimizer on the GPU (engine.py _do_optimizer_sanity_check l.1994-1997).
func (p *Plan) ZeroBF16Optimizer() bool {
	prec := p.Precision
	return p.Parallel.Norm().Zero == 1 && !prec.Megatron && prec.Params == units.BF16 && prec.Grads == units.FP32 &&
		(p.Offload == nil || p.Offload.Optimizer == "")
}

// DeepspeedPolicy is prec as DeepSpeed's ZeRO optimizers hold it.
func DeepspeedPolicy(prec Precision) Precision {
	d := prec
	if prec.Autocast {
		d = Precision{Name: prec.Name, Params: prec.Compute, Compute: prec.Compute, Grads: prec.Compute, Master: prec.Master, States: prec.States}
		if d.Master == units.InvalidDType {
			d.Master = units.FP32
		}
	}
	d.MasterClone = true
	return d
}

// ZeroMaster is the dtype of the ZeRO optimizer's master partition and
// of the gradient copy its step makes: the policy's master, fp32 where
// it has none.
func (p Precision) ZeroMaster() units.DType {
	if p.Master == units.InvalidDType {
		return units.FP32
	}
	return p.Master
}

// ZeroHostStates is the dtype of the optimizer state ZeRO-Offload's
// DeepSpeedCPUAdam keeps on the host: fp32 (fp32_optimizer_states=True,
// its default), or the policy's states under a 16-bit master that has
// them in 16 bits too (bf16_optimizer_states: engine.py passes
// fp32_optimizer_states=False).
func (p Precision) ZeroHostStates() units.DType {
	if p.Master == units.InvalidDType || p.Master == units.FP32 {
		return units.FP32
	}
	return p.States
}

// validateZeroPrecision refuses the dtypes DeepSpeed's ZeRO cannot hold
// (the rules above), where a user wrote them: a 16-bit master in
// another dtype than the model's, and moments on the GPU in another
// dtype than the master's.
func (p *Plan) validateZeroPrecision() error {
	if err := p.validateZeroGradAccum(); err != nil {
		return err
	}
	if p.Precision.Megatron || !p.Precision.Autocast && p.Precision.Master == units.InvalidDType || p.Parallel.Norm().Zero == 0 {
		return nil
	}
	d := DeepspeedPolicy(p.Precision)
	const path = "train"
	switch d.Master {
	case units.FP32:
	case units.BF16, units.FP16:
		if d.Params != d.Master {
			return &units.Error{Path: path, Msg: fmt.Sprintf("precision: DeepSpeed keeps a %s master copy of a %s model only (%s_master_weights_and_grads sits in its %s section); this one holds %s parameters", d.Master, d.Master, d.Master, d.Master, d.Params),
				Hint: fmt.Sprintf("precision(\"%s-mixed\", master=\"%s\") or drop master=", d.Master, d.Master)}
		}
	default:
		return &units.Error{Path: path, Msg: fmt.Sprintf("precision: DeepSpeed's ZeRO keeps its master weights in fp32, bf16 or fp16, not %s", d.Master),
			Hint: "master=\"fp32\" (DeepSpeed's default), or \"bf16\" for bf16_master_weights_and_grads"}
	}
	if !d.States.Float() || d.States == d.Master {
		return nil // 8-bit moments are the optimizer's own; or DeepSpeed's pairing
	}
	offloaded := p.Offload != nil && p.Offload.Optimizer != ""
	switch {
	case d.States != units.FP32:
		return &units.Error{Path: path, Msg: fmt.Sprintf("precision: DeepSpeed keeps %s optimizer states only with a %s master copy (bf16_optimizer_states requires bf16_master_weights_and_grads); this one's master is %s", d.States, d.States, d.Master),
			Hint: fmt.Sprintf("add master=\"%s\", or drop optimizer_states=", d.States)}
	case d.Master == units.FP16 || !offloaded:
		return &units.Error{Path: path, Msg: fmt.Sprintf("precision: a %s master copy with fp32 optimizer states needs ZeRO-Offload: on the GPU DeepSpeed makes the moments like the master (%s_master_weights_and_grads asserts offload_optimizer unless the states are %s too)", d.Master, d.Master, d.Master),
			Hint: fmt.Sprintf("optimizer_states=\"%s\" (bf16_optimizer_states), or offload=offload(optimizer=\"cpu\")", d.Master)}
	}
	return nil
}

// validateZeroGradAccum refuses the gradient dtypes (grad_accum_dtype) a
// ZeRO plan holds that memsh does not replay (the rules above): fp32
// accumulation beside a 16-bit model only (DeepSpeed's ZeRO takes every
// pair of fp32, bf16 and fp16: tests/unit/runtime/test_ds_initialize.py
// is_supported), and at stage 1 only as BF16_Optimizer.
func (p *Plan) validateZeroGradAccum() error {
	prec := p.Precision
	if prec.Autocast || !prec.ZeroGradAccum() {
		return nil
	}
	zero := p.Parallel.Norm().Zero
	if zero == 0 {
		return nil
	}
	const path = "train"
	if prec.Grads != units.FP32 || prec.Params != units.BF16 && prec.Params != units.FP16 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("precision: under DeepSpeed's ZeRO grads= is data_types.grad_accum_dtype, which memsh replays as fp32 beside a bf16 or fp16 model only (DeepSpeed takes the others too); this one holds %s parameters with %s gradients", prec.Params, prec.Grads),
			Hint: "grads=\"fp32\" with params=\"bf16\" (or \"fp16\"), or grads= the params' dtype (DeepSpeed's default)"}
	}
	if zero == 1 && !p.ZeroBF16Optimizer() {
		return &units.Error{Path: path, Msg: fmt.Sprintf("precision: DeepSpeed's ZeRO-1 accumulating %s gradients of the %s model keeps a grad_accum copy of each parameter (stage_1_and_2.py use_grad_accum_attribute), which memsh does not replay", prec.Grads, prec.Params),
			Hint: "zero=2, or grads= the params' dtype; a bf16 model with the optimizer on the GPU runs as BF16_Optimizer"}
	}
	if zero == 1 && prec.Master != units.InvalidDType && prec.Master != units.FP32 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("precision: DeepSpeed runs this ZeRO-1 as its BF16_Optimizer, whose master partition is fp32 whatever bf16_master_weights_and_grads (bf16_optimizer.py: .clone().float()); this one's master is %s", prec.Master),
			Hint: "master=\"fp32\", or zero=2 or zero=3 for a bf16 master"}
	}
	return nil
}
