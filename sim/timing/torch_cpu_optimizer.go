package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// torch.optim's step on the host. FSDP2's CPUOffloadPolicy
// (offload(params="cpu") with parallel(fsdp=True)) and FSDP1's
// CPUOffload(offload_params=True) (with parallel(fsdp=1)) keep this rank's
// parameter shards, their gradients and the optimizer state in host memory
// (replay/fsdp_offload.go, fsdp1_offload.go), so the training script's own optimizer steps
// them on the CPU after the backward; the next forward's all-gathers copy
// the updated shards to the GPU. It is priced as ZeRO-Offload's step is
// (cpu_optimizer.go): the host memory it streams at the node's host
// bandwidth, shared by the node's ranks, on the critical path.
//
// Which implementation runs, read from PyTorch (torch/optim/optimizer.py
// _default_to_fused_or_foreach and torch/optim/adam.py, cyyever/pytorch
// at b1d94d611b, a mirror of the 2.9 development branch; AdamW is Adam with
// decoupled_weight_decay there): with foreach and fused unset, foreach is
// chosen only when every parameter is on a foreach device (CUDA and the
// like), so host shards take the single-tensor for-loop
// (_single_tensor_adam). foreach=True on CPU tensors runs the same ops per
// tensor (the foreach slow path), so memsh prices both alike; fused=True
// has a CPU kernel (aten/src/ATen/native/cpu/FusedAdamKernel.cpp,
// FusedSGDKernel.cpp): one pass.
//
// Bytes per element of the for-loop, each op reading and writing whole
// tensors (P, G, S: the parameter's, gradient's and one moment's element
// size):
//
//   - AdamW (weight_decay 1e-2 by default): param.mul_(1 - lr*wd) 2P;
//     exp_avg.lerp_(grad) 2S+G; exp_avg_sq.mul_(beta2) 2S, .addcmul_(grad,
//     grad) 2S+G; denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)
//     .add_(eps): a new tensor S+S, another S+S, then 2S in place;
//     param.addcdiv_(exp_avg, denom) 2P+2S. 4P + 2G + 14S: 80 B in fp32.
//   - Adam (weight_decay 0 by default): the same without the decay, 72 B.
//   - SGD with momentum (_single_tensor_sgd): buf.mul_(momentum) 2B,
//     .add_(grad) 2B+G, param.add_(buf) 2P+B: 32 B; without momentum
//     param.add_(grad) 2P+G: 12 B.
//   - fused, and the other optimizers (an approximation, a lower bound):
//     one pass, reading the parameter, gradient and state and writing the
//     parameter and state.
//
// Not counted: the page faults of the temporaries (each sqrt and quotient
// is a fresh allocation; glibc serves large ones with new pages the kernel
// zeroes), the Python loop's per-tensor cost, and the CPU threads a rank
// gets (torchrun sets OMP_NUM_THREADS=1 for each of several processes on a
// node unless it is set, so a rank's ATen kernels may run on one core, far
// below the node's bandwidth). Each makes the step slower than priced: the
// term is a lower bound. DeepSpeed's ZeRO-Offload tutorial says
// DeepSpeedCPUAdam is "5X--7X faster than the standard PyTorch
// implementation" and pytorch#74588 measured FSDP's CPUOffload 3-10 times
// slower than without it, the optimizer step being the cause; memsh's
// bytes make torch's AdamW 80 / 28 = 2.9 times DeepSpeedCPUAdam's update.

// TorchCPUOptimizerBytes is the host memory bytes torch.optim's step
// streams per element of the shards it steps on the host, under plan's
// optimizer and precision.
func TorchCPUOptimizerBytes(plan *core.Plan) float64 {
	const n = 1 << 20 // any size: bytes per element
	size := func(dt units.DType) float64 { return float64(dt.Bytes(n)) / n }
	prec, o := plan.Precision, plan.Optimizer
	p, g, s := size(prec.Params), size(prec.Grads), size(prec.States)
	if o.ImplName() != "fused" {
		switch o.Kind {
		case core.AdamW:
			return 4*p + 2*g + 14*s
		case core.Adam:
			return 2*p + 2*g + 14*s
		case core.SGD:
			if o.Momentum > 0 {
				return 2*p + g + 5*s
			}
			return 2*p + g
		}
	}
	return 2*p + g + 2*stateBytesPerElement(o, prec.States)
}

// stateBytesPerElement is the optimizer state that grows with the
// elements, per element (a fused step's scalar step counter per tensor
// left out): the state of 2n elements less that of n, over n.
func stateBytesPerElement(o core.Optimizer, dt units.DType) float64 {
	const n = 1 << 20
	sum := func(k int64) (b int64) {
		for _, st := range o.States([]int64{k}, k, dt) {
			b += st.Bytes
		}
		return b
	}
	return float64(sum(2*n)-sum(n)) / n
}

// TorchCPUOptimizerSeconds is torch.optim's step of a rank's elements on
// the host, with the node's other ranks (ranks per host, at least 1)
// stepping shards of the same size at the same time.
func TorchCPUOptimizerSeconds(plan *core.Plan, elements float64, ranks int64) float64 {
	if elements <= 0 {
		return 0
	}
	return float64(max(ranks, 1)) * elements * TorchCPUOptimizerBytes(plan) / plan.Cluster.HostRate(plan.Device)
}
