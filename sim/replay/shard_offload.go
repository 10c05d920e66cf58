package replay

import (
	"github.com/memsh/memsh/sim/core"
)

// ZeRO-Offload on data-parallel ranks: DeepSpeed ZeRO stages 1-3 with
// offload_optimizer {device: cpu} (offload(optimizer="cpu") with zero=).
// Read from deepspeed/runtime/zero/stage_1_and_2.py and stage3.py at
// DeepSpeed 0.19.6 (commit edaa722):
//
//   - this rank's fp32 master partition, its optimizer state
//     (DeepSpeedCPUAdam: fp32 moments) and an fp32 gradient partition live
//     in host memory, and the step runs on the CPU (stage_1_and_2.py
//     491-507 and 837-844; stage3.py 1107-1111 and 1287-1292); stages 1-2
//     also keep a 16-bit CPU staging copy of the partition (498-507) that
//     the updated values go through on their way back to the GPU;
//   - stages 1-2 keep the full 16-bit parameters on the GPU
//     (bit16_groups_flat) but no gradient partition there:
//     grads_in_partition is not allocated with cpu_offload (1650-1668),
//     gradients accumulate in pinned host buffers instead
//     (async_accumulate_grad_in_cpu_via_gpu, 1516-1560) through one
//     persistent GPU buffer the size of the largest parameter
//     (temp_grad_buffer_for_gpu_offload, 591-593); at the step each
//     gradient is cast to fp32 on the GPU and copied into the host
//     partition (1590-1605);
//   - stage 3 keeps its fp16 parameter partition and reduce bucket on the
//     GPU, while grad_partitions_flat_buffer moves to pinned host memory
//     (737-752); the fp32 cast of each sub-group's gradients still happens
//     on the GPU before the copy (1407).
//
// The time model counts the PCIe transfers, exposed, no GPU optimizer
// step, and the CPU step (DeepSpeedCPUAdam) by the host memory it streams
// (timing/cpu_optimizer.go). Stages 1-2 issue each gradient's copy to the
// host from reduce_ipg_grads (copy_grads_in_partition,
// async_inplace_copy_grad_to_fp32_buffer_from_gpu, 1590-1605): on the
// compute stream unless overlap_comm (off by default at stages 1-2), and
// even then into pageable memory before DeepSpeed 0.19.5
// (offload_optimizer.pin_memory, #8207), where the copy holds the CPU
// until it completes: both exposed. parallel(overlap_comm=True) is the
// overlapped case with pinned memory (timing/comm.go); it also allocates
// the second reduce bucket (gather.go backwardStart). DeepSpeed
// builds this optimizer for ZeRO stages 1-3 only (a stage-0 config
// ignores offload_optimizer), so one GPU is ZeRO at dp=1.
//
// PCIe per step: stages 1-2 send the fp32 gradient partition to the host
// and the updated 16-bit partition back, and with gradient accumulation
// the 16-bit gradients to and from the host buffers that accumulate them
// (accumulateCopies; on the same stream as the fp32 copies, so exposed
// without overlap_comm, and with it behind each micro-step's backward:
// timing's SetZeROOffloadCopies); stage 3 sends the reduced 16-bit
// partition down and up again at the first micro-step (1905-1908), then
// the fp32 partition, and the 16-bit partition back (2585-2595).

// zeroParamOffload reports whether ZeRO-3 keeps its 16-bit parameter
// partitions in pinned host memory (offload_param, ZeRO-Infinity on the
// CPU): partition_parameters.py _partition_param puts each partition on
// the offload device (1790-1821) and stage3.py flattens them into pinned
// host buffers (839-862). Before a module's all-gather each partition is
// copied to the GPU (partition_parameters.py 1331-1333, 1368); the
// updated fp32 values go to the pinned partition on the host (stage3.py
// 2585-2595). Parameters under the persistence threshold stay on the GPU.
func (d *distState) zeroParamOffload(r *Replay) bool {
	return d != nil && d.Mode == DistZeRO && r.Plan.Offload != nil && r.Plan.Offload.Params != ""
}

// paramOnlyStepCopy counts, for ZeRO-3 with offload_param and the
// optimizer on the GPU (no offload_optimizer), the copy of a trainable
// sub-group of n elements to the host after the GPU step: stage3.py
// _reassign_or_swap_out_partitioned_parameters (2585-2595 at edaa722)
// copy_s the updated fp32 partition into the 16-bit host partition
// (fp16_partitioned_groups_flat, pinned), and on NVMe
// _partitioned_params_swap_out (1221-1239) puts it in the pinned swap
// buffers the same way (partitioned_param_swapper.py
// swap_out_partitioned_params). torch's blocking copy_ (DeepSpeed passes
// no non_blocking) from a CUDA tensor into a CPU tensor of another dtype
// converts on the CPU (pytorch/pytorch aten/src/ATen/native/cuda/Copy.cu
// at 007aa8ae, copy_kernel_cuda: "For blocking transfers conversions are
// performed on CPU to avoid allocating extra GPU memory"): the fp32 bytes
// cross PCIe into a pageable fp32 temporary of the sub-group's size
// (at::empty_like(dst, iter.dtype(1))), then are cast into the partition.
// That copy lands in pageable memory: the time model prices it at the
// pageable rate (PageableD2H; timing/offload.go). fp32 parameters need no
// conversion: the copy goes straight into the pinned partition.
func (d *distState) paramOnlyStepCopy(r *Replay, n int64) {
	if !d.zeroParamOffload(r) || d.ZeroOffload(r) || r.Plan.Phase == core.Eval {
		return
	}
	master := r.Plan.Precision.ZeroMaster()
	r.Rep.Traffic.PCIe += master.Bytes(n)
	if r.Plan.Precision.Params != master {
		fo := r.fo()
		fo.stepStaging = max(fo.stepStaging, master.Bytes(n)) // freed after each sub-group's copy
		d.pageableUp += master.Bytes(n)
	}
}

// PageableD2H is the bytes per step copied from the GPU into pageable
// host memory, part of Report.Traffic.PCIe: ZeRO-3 offload_param's fp32
// copy back of the updated partition (paramOnlyStepCopy). 0 on one GPU.
func (d *distState) PageableD2H() int64 {
	if d == nil {
		return 0
	}
	return d.pageableUp
}

// zeroOffload reports whether the ZeRO optimizer runs on the host.
func (d *distState) ZeroOffload(r *Replay) bool {
	return d != nil && d.Mode == DistZeRO && r.optimizerTier() != ""
}

// offloadShard accounts this rank's flat partition of n elements on the
// host: fp32 master, optimizer state, fp32 gradients (and stages 1-2's
// 16-bit staging copy), with the step's PCIe traffic.
func (d *distState) offloadShard(r *Replay, n int64) {
	fo := r.fo()
	prec := r.Plan.Precision
	master := prec.ZeroMaster().Bytes(n)
	var states int64
	for _, s := range r.Plan.Optimizer.States([]int64{n}, n, prec.ZeroHostStates()) {
		states += s.Bytes
	}
	r.Rep.States.Master += master
	r.Rep.States.Optimizer += states
	if !d.nvmeShard(r, n, states) { // ZeRO-Infinity swaps it to NVMe (offload_nvme.go)
		fo.hostStates += master + states
		fo.addHostGrads(prec.ZeroMaster(), prec.ZeroMaster().Bytes(n))
	}
	down := prec.ZeroMaster().Bytes(n) // the gradient partition in the master's dtype
	if d.Par.Zero == 3 {
		down += 2 * prec.Grads.Bytes(n) // the reduced partition to the host and back at the first micro-step
	} else {
		fo.hostStates += prec.Params.Bytes(n) // the 16-bit staging copy of the partition
	}
	if d.Par.Zero < 3 {
		down += d.accumulateCopies(r) * prec.Params.Bytes(n)
	}
	if d.zeroParamOffload(r) {
		r.Rep.Traffic.PCIe += down // the updated partition stays on the host
		return
	}
	r.Rep.Traffic.PCIe += down + prec.Params.Bytes(n) // and the updated 16-bit partition back
}

// offloadGradBuffers12 counts the 16-bit host buffers stages 1-2 keep
// with cpu_offload, pinned (offload_optimizer.pin_memory, DeepSpeed's
// default from 0.19.5), read from stage_1_and_2.py at edaa722:
// temp_grad_buffer_for_cpu_offload, the largest parameter's numel in
// the parameters' dtype on the host (585-590, always with cpu_offload),
// and accumulated_grads_in_cpu, the partition's parameters in their
// dtype (buffer_to_accumulate_to_in_cpu, 1524-1529), with more than one
// micro-step: stage 2 accumulates there at every micro-step; stage 1
// creates it at the boundary, whose micro_step_id is past 0
// (async_accumulate_grad_in_cpu_via_gpu, accumulateCopies).
func (d *distState) offloadGradBuffers12(r *Replay, largest, part int64) {
	dt := r.Plan.Precision.Params
	fo := r.fo()
	fo.addGradBuffer(dt, dt.Bytes(largest))
	if d.accumulateCopies(r) > 0 {
		fo.addGradBuffer(dt, dt.Bytes(part))
	}
}

// accumulateCopies is how many times stages 1-2 copy the partition's
// 16-bit gradients across PCIe per step to accumulate them on the host
// over micro-steps (gradient accumulation), read from
// stage_1_and_2.py at edaa722: copy_grads_in_partition (1650-1666), with
// cpu_offload, calls async_accumulate_grad_in_cpu_via_gpu (1516-1560)
// unless the micro-step is the step's only one: it copies the host buffer
// (param.dtype, the whole parameter) into a GPU buffer and adds it to the
// gradient when micro_step_id > 0, then copies the sum back to the host;
// the boundary then copies the fp32 partition as without accumulation.
// Stage 2 (partition_gradients) reduces and copies at every micro-step
// (reduce_ready_partitions_and_remove_grads, 1767-1769): one copy down
// at the first, one up and one down at each later one, 2g - 1 for g
// micro-steps. Stage 1 reduces at the boundary only, where micro_step_id
// is g - 1 > 0: one up and one down. One micro-step copies none. The
// whole parameters of the partition's params are priced as the partition
// (the ones straddling its edges are counted once).
func (d *distState) accumulateCopies(r *Replay) int64 {
	return AccumulateCopies(r.Plan, d.Par.Zero)
}

// AccumulateCopies is accumulateCopies for a plan at ZeRO stage zero
// (the search's fast path prices the same copies): the sum of
// AccumulateCopiesAt over the step's micro-steps.
func AccumulateCopies(plan *core.Plan, zero int) int64 {
	g := ZeROMicroSteps(plan)
	switch {
	case g <= 1 || zero < 1 || zero > 2:
		return 0
	case zero == 2:
		return 2*g - 1
	default:
		return 2
	}
}

// AccumulateCopiesAt is how many of AccumulateCopies micro-step k (0 to
// g - 1 of g) issues: stage 2 one copy down at the first and one up and
// one down at each later one, stage 1 one up and one down at the last.
// The time model places them on the micro-step that issues them
// (timing/comm.go, overlap_comm).
func AccumulateCopiesAt(zero int, k, g int64) int64 {
	switch {
	case g <= 1 || zero < 1 || zero > 2 || k < 0 || k >= g:
		return 0
	case zero == 2 && k == 0:
		return 1
	case zero == 2 || k == g-1:
		return 2
	default:
		return 0
	}
}

// ZeROMicroSteps is the number of micro-steps (backward passes) of one
// step of plan: its gradient accumulation, a pipeline stage's
// micro-batches.
func ZeROMicroSteps(plan *core.Plan) int64 {
	if plan.PipeStage != nil {
		return plan.MicroBatches()
	}
	return max(plan.GradAccum, 1)
}

// largestTrainable is the element count of the largest trainable parameter.
func (d *distState) largestTrainable() int64 {
	var n int64
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo < 0 && p.Trainable {
			n = max(n, p.Numel)
		}
	}
	return n
}

// offloadStep12 is the stage 1-2 step with the optimizer on the host: one
// gradient at a time is cast to fp32 on the GPU and copied down.
func (d *distState) offloadStep12(r *Replay) {
	master := r.Plan.Precision.ZeroMaster()
	if n := min(d.largestTrainable(), d.partitionElems()); n > 0 && r.Plan.Precision.Grads != master {
		r.release(d.alloc(r, master.String()+" gradient for the host copy", []int64{n}, master, master.Bytes(n), core.CatTemporaries,
			"one gradient cast to the master's dtype on the GPU before its copy into the host partition (stage_1_and_2.py, cpu_offload)"))
	}
}

// partitionOf is this rank's ZeRO-3 partition of unit u, elements.
func (d *distState) partitionOf(u int32) int64 {
	var n int64
	for _, pi := range d.units[u].params {
		n += ceilDiv(d.p.Params[pi].Numel, d.Degree(pi))
	}
	return n
}

// partitionElems is this rank's partition of the trainable groups, elements.
func (d *distState) partitionElems() int64 {
	var part int64
	for _, g := range d.groups(true) {
		part += ZeroPartition(g.numel, g.n)
	}
	return part
}
