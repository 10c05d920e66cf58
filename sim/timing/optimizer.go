package timing

import (
	"math"

	"github.com/memsh/memsh/sim/core"
)

// The optimizer step: its HBM traffic at the copy bandwidth, and the
// kernels its implementation launches (core.Optimizer.Impl).
//
// PyTorch's Adam and AdamW (torch/optim/adam.py, _multi_tensor_adam and
// _single_tensor_adam) run eight elementwise ops per step: the weight
// decay (mul_), exp_avg (lerp_), exp_avg_sq (mul_, addcmul_), the
// denominator (sqrt into a new tensor, div_, add_) and the update
// (addcdiv_). Each reads and writes whole tensors, in tensor passes:
// mul_ 2 (weight), lerp_ 3 (exp_avg twice, the gradient), mul_ 2,
// addcmul_ 3 (exp_avg_sq twice, the gradient), sqrt 2, div_ 2, add_ 2
// (the denominator), addcdiv_ 4 (the weight twice, exp_avg, the
// denominator): 20 against the fused kernel's 7 (weight, gradient and
// both moments read, weight and moments written; replay.OptimizerTraffic),
// 20/7 the traffic with states and weights of one dtype. (memsh counted
// 18 before December 2026, missing the denominator's read by addcdiv_
// and one of its three passes; the H200's measured AdamW steps,
// timing/h200_measured_test.go, are what showed it.) "for-loop" launches the eight ops
// per parameter tensor; "foreach" launches each op once per chunk of
// tensors (ATen's multi_tensor_apply: at most 36 tensors of four lists
// and 320 blocks of 65,536 elements per launch, MultiTensorApply.cuh);
// "fused" one kernel per chunk. Other optimizers are priced with Adam's
// launch pattern and their own traffic (an approximation).

const (
	adamOps            = 8
	unfusedAdamTraffic = 20.0 / 7
	foreachTensors     = 36
	foreachElems       = 320 * 65536
)

// OptimizerWork is what the optimizer step does on one GPU.
type OptimizerWork struct {
	Traffic  float64 // HBM bytes of the fused update
	Tensors  float64 // trainable parameter tensors stepped
	Elements float64 // their elements
	Muon     MuonWork
	// HPGrads is the gradient elements DeepSpeed's BF16_Optimizer casts
	// and adds into its fp32 buffer at each micro-batch's backward end
	// (update_hp_grads: every trainable parameter, whole;
	// replay/zero_accum.go), 0 otherwise.
	HPGrads float64
	// Zero is DeepSpeed ZeRO's trainable flat groups, dense and expert,
	// where its step runs on the GPU: its norm's copies and flattened
	// gradients (zero_step.go); empty otherwise.
	Zero [2]ZeroGroup
}

// zeroStep reports whether the step is DeepSpeed ZeRO's on the GPU.
func (w OptimizerWork) zeroStep() bool { return w.Zero[0].Tensors+w.Zero[1].Tensors > 0 }

// OptimizerTime is the step's GPU time and CPU dispatch time, with the
// work on the gradients that comes with it (gradients.go).
func OptimizerTime(plan *core.Plan, w OptimizerWork) (gpu, cpu float64) {
	mg, mc := muonTime(plan, w.Muon) // muon.go
	if w.Traffic <= 0 {
		return mg, mc
	}
	impl := plan.StepImpl()
	traffic := w.Traffic
	ops := float64(adamOps)
	if impl != "fused" {
		traffic *= unfusedAdamTraffic
	}
	tensors := w.Tensors - w.Muon.Tensors // Muon's matrices are its own kernels (muon.go)
	chunks := math.Max(math.Ceil(tensors/foreachTensors), math.Ceil((w.Elements-w.Muon.Elements)/foreachElems))
	var launches float64
	switch impl {
	case "fused":
		launches = chunks
	case "for-loop":
		launches = ops * tensors
	default:
		launches = ops * chunks
	}
	gpu, _ = streamTime(&plan.Device, traffic)
	gpu = max(gpu, launches*kernelFloor)
	// The step runs eagerly whatever the model's dispatch: torch.compile
	// and CUDA graphs capture the model's forward and backward, not the
	// optimizer (torchtitan and Megatron-LM compile or capture the model).
	// The clipping, unscaling and zeroing of the gradients come with it
	// (gradients.go): the CPU launches them in order with the update.
	g, c := gradientWork(plan, w)
	zg, zc := zeroStepTime(plan, w.Zero)
	return gpu + g + mg + zg, launches*eagerFwdCPU + c + mc + zc
}
