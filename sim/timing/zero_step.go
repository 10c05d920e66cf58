package timing

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// DeepSpeed ZeRO's copies before its step on the GPU (replay/zero_step.go,
// read from DeepSpeed 0.19.8 and measured on the CPU by
// tools/oracle/zero_reduce.py): each gradient of the rank's partition
// copied to fp64 and its norm taken (get_grad_norm_direct), the partition
// flattened by torch.cat and cast to the master's fp32 (ZeRO-3 per
// sub-group, _prepare_fp32_grad_for_sub_group; ZeRO-1/2 per flat group,
// single_grad_partition). Each is an elementwise kernel over the shard,
// priced like the step's work on the gradients (gradients.go): its bytes
// at the copy bandwidth, its launches at the kernel floor on the GPU and
// at eager dispatch on the CPU (the step runs from Python). Before
// session 48 they were in the replay's memory but not in its time.
//
// The work is counted from each flat group's totals, which a search's
// estimate has as well as a replay: the bytes exactly; the launches with
// ZeRO-3's sub-groups taken as ceil(partition / sub_group_size) (DeepSpeed
// closes one once it reaches sub_group_size: as many or one fewer) and
// ZeRO-1/2's partition holding its share of the group's tensors and the
// one it starts inside (at most that many), the flatten in the model's
// dtype (the replay's torch.cat promotes to the accumulation dtype where
// the partition holds a zero gradient: zero_grads.go).

const (
	// catBatch is the inputs one CUDA torch.cat kernel copies:
	// CatArrayBatchedCopy<..., 64, 64> in the H200 profile of
	// sim/testdata/cuda_h200/profile.jsonl (aten/src/ATen/native/cuda/Shape.cu).
	catBatch = 64
	// normScalars are get_grad_norm_direct's kernels over the norms:
	// torch.stack, pow and sum.
	normScalars = 3
	// zeroSubGroupSize is DeepSpeed's sub_group_size default, elements
	// (replay's zeroSubGroup).
	zeroSubGroupSize = 1e9
)

// ZeroGroup is one flat group's trainable parameters (dense or expert) as
// DeepSpeed's step sees them: their elements, this rank's ZeRO-3
// partitions of them, their tensors and the group's ranks.
type ZeroGroup struct {
	Numel, Part, Tensors, Degree int64
}

// Add counts n parameters of numel elements each over degree ranks.
func (g *ZeroGroup) Add(numel, n, degree int64) {
	g.Numel += n * numel
	g.Part += n * ((numel + degree - 1) / degree)
	g.Tensors += n
	g.Degree = degree
}

// ZeroStepWork is the HBM traffic and launches of the copies, and of the
// scaling that follows them: unscale_and_clip_grads multiplies each fp32
// partition (ZeRO-1/2's flat group, ZeRO-3's sub-group) by 1 /
// combined_scale in place whether or not it clips (stage_1_and_2.py
// l.2434-2449 and stage3.py l.2696-2705 at edaa722: the loss scale, 1
// under bf16, times the clamped clip coefficient when gradient_clipping >
// 0, a few scalar kernels then). DeepSpeed's clip is this norm and this
// scale, so gradients.go does not price torch's clip_grad_norm_ for a
// ZeRO step on the GPU.
type ZeroStepWork struct {
	Norm, Flat, Cast, Scale float64 // bytes read and written
	Kernels                 float64
}

// ZeroStepWorkOf is the copies of a ZeRO step over groups (OptimizerWork.Zero).
func ZeroStepWorkOf(plan *core.Plan, groups [2]ZeroGroup) ZeroStepWork {
	var w ZeroStepWork
	prec := plan.Precision
	master := prec.ZeroMaster()
	copies := func(n float64, dt units.DType, tensors, sets float64) {
		g, m := float64(dt.Bytes(1)), float64(master.Bytes(1))
		nb := float64(units.FP64.Bytes(1)) // get_norm_dtype() on CUDA
		w.Norm += n * (g + 2*nb)           // .to(fp64) reads and writes, .norm reads
		w.Flat += 2 * g * n
		w.Kernels += 2*tensors + normScalars*sets + math.Ceil(tensors/catBatch)
		if dt != master {
			w.Cast += (g + m) * n
			w.Kernels += sets
		}
		w.Scale += 2 * m * n
		w.Kernels += sets
		if plan.Overheads.ClipGradNorm > 0 {
			w.Kernels += clipScalarKernels * sets
		}
	}
	if plan.Parallel.Norm().Zero == 3 {
		var part, tensors float64
		for _, g := range groups {
			part += float64(g.Part)
			tensors += float64(g.Tensors)
		}
		if part > 0 {
			copies(part, prec.Grads, tensors, math.Ceil(part/zeroSubGroupSize))
		}
		return w
	}
	for _, g := range groups {
		if g.Tensors == 0 {
			continue
		}
		n := float64(replay.ZeroPartition(g.Numel, g.Degree))
		slices := math.Min(float64(g.Tensors), math.Ceil(float64(g.Tensors)/float64(g.Degree))+1)
		copies(n, prec.Params, slices, 1)
	}
	return w
}

// zeroStepTime is their GPU seconds and CPU dispatch seconds.
func zeroStepTime(plan *core.Plan, groups [2]ZeroGroup) (gpu, cpu float64) {
	w := ZeroStepWorkOf(plan, groups)
	b := w.Norm + w.Flat + w.Cast + w.Scale
	if b <= 0 {
		return 0, 0
	}
	t, _ := streamTime(&plan.Device, b)
	return max(t, w.Kernels*kernelFloor), w.Kernels * eagerFwdCPU
}
