package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// ZeRO-Infinity: DeepSpeed ZeRO-3 with offload_optimizer {device: nvme}
// and/or offload_param {device: nvme} (offload(optimizer="nvme"),
// offload(params="nvme") with zero=3). Read from DeepSpeed at commit
// edaa722 (0.19.6), with the configs' defaults (runtime/zero/
// offload_config.py, runtime/swap_tensor/constants.py, zero/config.py):
//
//   - optimizer on NVMe (stage3.py _configure_offloading 773-788,
//     _configure_tensor_swapping 790-803, swapper PartitionedOptimizerSwapper
//     unless pipeline_read or pipeline_write): a sub-group (sub_group_size
//     1e9 elements) is swapped when its fp32 bytes reach MIN_AIO_BYTES = 1
//     MiB (swap_tensor/utils.py 14; optimizer_utils.py is_swappable_tensor);
//     its fp32 master, optimizer state and fp32 gradients live in files on
//     NVMe, smaller sub-groups stay in host memory as with
//     optimizer="cpu" (_create_fp32_partitions 1030-1130). The host keeps
//     one SwapBufferManager: buffer_count (4) pinned fp32 buffers of the
//     largest sub-group's elements, aligned to AIO_ALIGNED_BYTES = 1024
//     (optimizer_utils.py 184-192, utils.py SwapBufferManager 180-195).
//     Per step: the boundary swaps each sub-group's fp32 gradients out
//     (_swap_out_offload_fp32_gradients, 1407-1416), then step() walks the
//     sub-groups (2604-2640): swap_in_optimizer_state reads the master,
//     the state and the gradients (partitioned_optimizer_swapper.py
//     swap_in_optimizer_state: num_tensors + 1 buffers) and waits, the CPU
//     optimizer steps, swap_out_optimizer_state writes master and state
//     back and waits. Nothing overlaps in the default swapper; the fp16
//     grad_partitions_flat_buffer stays in pinned host memory
//     (shard_setup.go).
//   - parameters on NVMe (stage3.py _create_param_groups_fp16_flat_cpu_memory
//     840-866, _create_fp16_partitions_with_defragmentation 925-970): each
//     trainable group keeps a pinned flat host buffer of min(its partition,
//     max_in_cpu = 1e9) elements; a sub-group that fits in what is left of
//     it lives there, any other on NVMe, read into the parameter swapper's
//     buffers before each all-gather (partition_parameters.py 1519, 1684-
//     1692) and dropped after it without a write (1779-1781); the step
//     writes the updated 16-bit values of the NVMe sub-groups back
//     (_partitioned_params_swap_out 1221-1240) through a pinned buffer
//     reserved once any sub-group is on NVMe, for the parameters of the
//     largest sub-group of all (reserve_partitioned_swap_space, 955-969:
//     sized by their whole numel, ds_numel = param.numel() at
//     partition_parameters.py 1254, not their partitions). The parameter swapper
//     (partitioned_param_swapper.py 83-134) pins buffer_count (5) x
//     buffer_size (1e8) elements, aligned, in the parameters' dtype.
//     Frozen parameters are not in those groups: Init's _partition_param
//     (partition_parameters.py 1790-1803) puts each swappable partition on
//     NVMe, a smaller one on the host.
//
// The GPU side is ZeRO-3's with CPU offload: the 16-bit partitions come
// to the GPU over PCIe before each gather either way.

const (
	aioMinBytes        = 1 << 20       // MIN_AIO_BYTES (swap_tensor/utils.py), also the default aio block_size
	aioAlignBytes      = 1024          // AIO_ALIGNED_BYTES x intra_op_parallelism (1)
	optSwapBuffers     = 4             // offload_optimizer.buffer_count
	paramSwapBuffers   = 5             // offload_param.buffer_count
	paramSwapBufferLen = 100_000_000   // offload_param.buffer_size, elements
	paramsMaxInCPU     = 1_000_000_000 // offload_param.max_in_cpu, elements
)

// NVMeIO is the NVMe traffic of one step by when it happens, bytes per
// GPU (the time model prices each phase, timing/nvme.go).
type NVMeIO struct {
	GradWrite  int64 // fp32 gradients swapped out at the accumulation boundary
	StepRead   int64 // master, optimizer state and gradients read by the step
	StepWrite  int64 // master and optimizer state written back by the step
	ParamRead  int64 // 16-bit partitions read before their all-gathers (every gather)
	ParamWrite int64 // updated 16-bit partitions written after the step
}

// Total is every byte of the step.
func (n NVMeIO) Total() int64 {
	return n.GradWrite + n.StepRead + n.StepWrite + n.ParamRead + n.ParamWrite
}

// nvmeRecord is what ZeRO-Infinity keeps on NVMe and in its swap buffers.
type nvmeRecord struct {
	io              NVMeIO
	optStates       int64 // bytes on NVMe: master, optimizer state, fp32 gradients
	params          int64 // bytes on NVMe: 16-bit partitions
	optLargest      int64 // largest sub-group, elements (the optimizer swapper's buffers)
	paramSwapOut    int64 // the partitioned swap buffer, elements: the largest sub-group's whole parameters
	largestSub      int64 // that sub-group's partition, elements
	anyOnNVMe       bool  // a trainable sub-group lives on NVMe (DeepSpeed then reserves the buffer)
	paramOnNVMe     []bool
	flatCap, flatAt int64 // the current group's pinned flat buffer and what of it is used, elements
}

// NVMe is the step's NVMe traffic by phase (zero without an nvme tier).
func (r *Replay) NVMe() NVMeIO {
	if r.off == nil || r.off.nvme == nil {
		return NVMeIO{}
	}
	return r.off.nvme.io
}

func (fo *offloadRecord) nv() *nvmeRecord {
	if fo.nvme == nil {
		fo.nvme = &nvmeRecord{}
	}
	return fo.nvme
}

// aioAligned is n elements of elem bytes rounded up to the aio alignment
// (_io_aligned_numel).
func aioAligned(n, elem int64) int64 {
	a := aioAlignBytes / max(elem, 1)
	if r := n % a; r != 0 {
		return n + a - r
	}
	return n
}

// optimizerOnNVMe reports whether ZeRO-3 swaps the optimizer to NVMe.
func (d *distState) optimizerOnNVMe(r *Replay) bool {
	return d != nil && d.Mode == DistZeRO && d.Par.Zero == 3 && r.optimizerTier() == "nvme"
}

// paramsOnNVMe reports whether ZeRO-3 keeps parameter partitions on NVMe.
func (d *distState) paramsOnNVMe(r *Replay) bool {
	return d.zeroParamOffload(r) && r.Plan.Offload.Params == "nvme"
}

// nvmeShard swaps a sub-group of n elements with states bytes of
// optimizer state to NVMe when it is swappable; false leaves it to
// offloadShard's host accounting.
func (d *distState) nvmeShard(r *Replay, n, states int64) bool {
	if !d.optimizerOnNVMe(r) {
		return false
	}
	nv := r.fo().nv()
	nv.optLargest = max(nv.optLargest, n)
	m := r.Plan.Precision.ZeroMaster()
	if m.Bytes(n) < aioMinBytes {
		return false
	}
	master, grads := m.Bytes(n), m.Bytes(n)
	nv.optStates += master + states + grads
	if r.Plan.Phase == core.Eval { // evaluation steps nothing
		return true
	}
	nv.io.GradWrite += grads
	nv.io.StepRead += master + states + grads
	nv.io.StepWrite += master + states
	return true
}

// nvmeParamGroup starts a group of parameter partitions of total
// elements: a trainable group gets its pinned flat host buffer.
func (d *distState) nvmeParamGroup(r *Replay, total int64, trainable bool) {
	nv := r.fo().nv()
	nv.flatAt = 0
	nv.flatCap = 0
	if trainable {
		nv.flatCap = min(total, paramsMaxInCPU)
		r.fo().hostParams += r.Plan.Precision.Params.Bytes(nv.flatCap)
	}
	if nv.paramOnNVMe == nil {
		nv.paramOnNVMe = make([]bool, len(d.p.Params))
	}
}

// nvmeParamSubGroup places a trainable sub-group of sub partition
// elements (params: its parameters) in the flat buffer or on NVMe.
func (d *distState) nvmeParamSubGroup(r *Replay, sub int64, params []int32) {
	nv := r.fo().nv()
	dt := r.Plan.Precision.Params
	if sub > nv.largestSub { // the first largest sub-group, by its partition (stage3.py 960-966)
		nv.largestSub, nv.paramSwapOut = sub, 0
		for _, pi := range params {
			nv.paramSwapOut += aioAligned(d.p.Params[pi].Numel, dt.Bytes(1))
		}
	}
	fits := nv.flatAt+sub <= nv.flatCap
	nv.flatAt += sub
	if fits {
		return
	}
	for _, pi := range params {
		nv.paramOnNVMe[pi] = true
	}
	nv.anyOnNVMe = true
	nv.params += dt.Bytes(sub)
	if r.Plan.Phase != core.Eval {
		nv.io.ParamWrite += dt.Bytes(sub)
	}
}

// nvmeFrozenParam places a frozen parameter's partition of n elements:
// on NVMe when swappable (false: on the host, as with params="cpu").
func (d *distState) nvmeFrozenParam(r *Replay, pi int32, n int64) bool {
	dt := r.Plan.Precision.Params
	if dt.Bytes(n) < aioMinBytes {
		return false
	}
	nv := r.fo().nv()
	nv.paramOnNVMe[pi] = true
	nv.params += dt.Bytes(n)
	return true
}

// nvmeGatherRead counts the NVMe read of unit u's partitions before its
// all-gather, once per micro-batch: the replay replays one, and every
// micro-batch gathers again (as FSDP offload's offloadRepeats counts its
// copies).
func (d *distState) nvmeGatherRead(r *Replay, u int32) {
	if r.off == nil || r.off.nvme == nil || r.off.nvme.paramOnNVMe == nil {
		return
	}
	nv := r.off.nvme
	dt := r.Plan.Precision.Params
	for _, pi := range d.units[u].params {
		if nv.paramOnNVMe[pi] {
			nv.io.ParamRead += max(d.plan.GradAccum, 1) * dt.Bytes(ceilDiv(d.p.Params[pi].Numel, d.Degree(pi)))
		}
	}
}

// nvmeHost adds ZeRO-Infinity's pinned swap buffers to the host rows and
// a note of what lives on NVMe.
func (r *Replay) nvmeHost(rep *Report) []Share {
	nv := r.off.nvme
	if nv == nil {
		return nil
	}
	var rows []Share
	if r.optimizerTier() == "nvme" && nv.optLargest > 0 {
		rows = append(rows, Share{Name: "optimizer swap buffers (pinned)", Bytes: optSwapBuffers * units.FP32.Bytes(aioAligned(nv.optLargest, 4))})
	}
	if r.Plan.Offload.Params == "nvme" {
		dt := r.Plan.Precision.Params
		b := paramSwapBuffers * dt.Bytes(aioAligned(paramSwapBufferLen, dt.Bytes(1)))
		if nv.anyOnNVMe {
			b += dt.Bytes(nv.paramSwapOut)
		}
		rows = append(rows, Share{Name: "parameter swap buffers (pinned)", Bytes: b})
	}
	if nv.optStates+nv.params > 0 {
		io := nv.io
		rep.Notes = append(rep.Notes, fmt.Sprintf("NVMe per GPU %s (optimizer state, master weights and fp32 gradients %s, parameters %s); per step it reads %s and writes %s (ZeRO-Infinity)",
			units.FormatBytes(nv.optStates+nv.params), units.FormatBytes(nv.optStates), units.FormatBytes(nv.params),
			units.FormatBytes(io.StepRead+io.ParamRead), units.FormatBytes(io.GradWrite+io.StepWrite+io.ParamWrite)))
	}
	rep.Traffic.NVMe += nv.io.Total()
	return rows
}
