package timing

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The work on the gradients that comes with the optimizer step, each
// priced like the update (optimizer.go): its passes over the gradients
// at the copy bandwidth, its launches at the kernel floor on the GPU and
// at eager dispatch on the CPU (the step runs from Python whatever the
// model's dispatch).
//
//   - Gradient clipping, train(clip_grad_norm=...): a norm of every
//     gradient, the total norm, and every gradient multiplied by the
//     clamped coefficient (torch.nn.utils.clip_grad_norm_): one pass to
//     read the gradients, one to read and write them. PyTorch before 2.0
//     (torch/nn/utils/clip_grad.py @v1.10.0, the one the Hugging Face
//     Trainer of 2022 ran) launches a torch.norm and a mul_ per parameter;
//     from 2.0 (foreach=None on CUDA) torch._foreach_norm and
//     torch._foreach_mul_ launch once per chunk of tensors. The
//     optimizer's "for-loop" implementation stands for the first, the
//     others for the second. Four small kernels form the total norm and
//     the coefficient (stack, norm, add, clamp); none syncs with the host.
//     Under ZeRO and FSDP the passes run over the rank's shard
//     (OptimizerWorkOf). DeepSpeed's engine clips inside its step and is
//     priced the same, though it runs otherwise: ZeRO-1/2 take a norm of
//     a float64 copy of each gradient whether or not they clip, and scale
//     the flat partition once (runtime/zero/stage_1_and_2.py at edaa722
//     l.2054-2101, l.2434-2448); that difference is not priced.
//   - GradScaler's unscale_ under fp16 autocast (precision "fp16-mixed":
//     torch.cuda.amp.GradScaler, which the HF Trainer, Lightning and
//     accelerate run with fp16 autocast): torch._amp_foreach_non_finite_
//     check_and_unscale_ reads and writes every gradient, once per chunk
//     of tensors (torch/cuda/amp/grad_scaler.py _unscale_grads_), and
//     step() reads found_inf with .item() (a host sync before the update).
//   - Gradients zeroed in place (core.Plan.KeepGrads: zero_grad() with
//     set_to_none=False, torch.nn.Module.zero_grad's default before 2.0):
//     a zero_ per parameter, one write pass over the gradients.
//   - DeepSpeed's BF16_Optimizer (ZeRO-1 of a bf16 model accumulating in
//     fp32, replay/zero_accum.go) adds each gradient into its fp32 buffer
//     at every micro-batch's backward end (bf16_optimizer.py
//     update_hp_grads: hp_grad.add_(lp.grad.to(fp32)), a parameter at a
//     time): read the bf16 gradient and write its fp32 copy, then read the
//     copy and the buffer and write the buffer, two kernels a parameter
//     (OptimizerWork.HPGrads), counted with the step it belongs to.
//
// Not priced: autograd's accumulation into gradients that already exist
// (a grad += new_grad per parameter and micro-batch when they are kept).

const (
	clipScalarKernels  = 4   // stack, norm, add, clamp
	foreachListTensors = 110 // multi_tensor_apply's tensors per launch for one tensor list (depth_to_max_tensors[0])
)

// gradientWork is the clipping, unscaling and zeroing that run with the
// step: GPU seconds and CPU dispatch seconds.
func gradientWork(plan *core.Plan, w OptimizerWork) (gpu, cpu float64) {
	gb := w.Elements * elemBytes(gradDtype(plan))
	forLoop := plan.StepImpl() == "for-loop"
	chunks := math.Max(math.Ceil(w.Tensors/foreachListTensors), math.Ceil(w.Elements/foreachElems))
	add := func(passes, launches float64) {
		t, _ := streamTime(&plan.Device, passes*gb)
		gpu += max(t, launches*kernelFloor)
		cpu += launches * eagerFwdCPU
	}
	if plan.Overheads.ClipGradNorm > 0 && !w.zeroStep() { // DeepSpeed's own norm and scale: zero_step.go
		per := 2 * chunks
		if forLoop {
			per = 2 * w.Tensors
		}
		add(3, per+clipScalarKernels)
	}
	if GradScaled(plan.Precision) {
		add(2, chunks)
	}
	if plan.KeepGrads {
		per := chunks
		if forLoop {
			per = w.Tensors
		}
		add(1, per)
	}
	if w.HPGrads > 0 {
		m := float64(max(plan.GradAccum, 1))
		prec := plan.Precision
		b := m * w.HPGrads * float64(prec.Params.Bytes(1)+4*prec.Grads.Bytes(1))
		launches := m * 2 * w.Tensors
		t, _ := streamTime(&plan.Device, b)
		gpu += max(t, launches*kernelFloor)
		cpu += launches * eagerFwdCPU
	}
	return gpu, cpu
}

// GradScaled reports whether a precision runs torch's GradScaler: fp16
// autocast over fp32 weights (bf16 needs no loss scaling).
func GradScaled(p core.Precision) bool {
	return p.Autocast && p.Compute == units.FP16
}

// gradDtype is the dtype of the gradients the step reads.
func gradDtype(plan *core.Plan) units.DType {
	if plan.Precision.Grads != units.InvalidDType {
		return plan.Precision.Grads
	}
	return units.FP32
}
