package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// ZeRO-Infinity's NVMe time (offload(optimizer="nvme"),
// offload(params="nvme") with zero=3; the bytes are the replay's,
// replay/offload_nvme.go): every byte the step reads or writes on the
// node's NVMe at the node's rates (hw.Cluster.NVMeRates: cluster(nvme_read=,
// nvme_write=), else hw.DefaultNVMe), shared by the node's GPUs, which
// swap their own partitions at the same time on the same drives.
//
// Nothing of it overlaps, read at DeepSpeed edaa722:
//   - the optimizer: DeepSpeed's default swapper
//     (PartitionedOptimizerSwapper; PipelinedOptimizerSwapper only with
//     offload_optimizer.pipeline_read or pipeline_write, both False by
//     default: runtime/zero/offload_config.py) reads a sub-group's master,
//     state and gradients and waits (swap_in_optimizer_state:
//     aio_handle.wait()), steps it on the CPU (cpu_optimizer), writes it
//     back and waits (_swap_out_optimizer_state), one sub-group after the
//     other (stage3.py step, 2604-2640): the NVMe time adds to the CPU
//     step. The boundary's gradient writes go out asynchronously
//     (AsyncTensorSwapper) but step() flushes them before its first read
//     (_flush_gradient_swapper): priced with the step, an upper bound
//     where the last backward could hide some;
//   - the parameters: a partition on NVMe is read into the parameter
//     swapper's buffers before its all-gather (partition_parameters.py
//     1684-1692: swap_in(async_op=False) unless already in flight) and
//     its PCIe copy; the updated partitions are written after the step.
//     Those reads do overlap: once the trace is complete the coordinator
//     swaps in, asynchronously, the partitions of the parameters it will
//     gather after those already in flight
//     (partitioned_param_coordinator.py __prefetch_nvme_param_partitions,
//     667-690; prefetch_nvme is on when offload_param's device is nvme,
//     parameter_offload.py 212), and the gather waits for them
//     (synchronize_reads). They join the chain of the prefetched gathers
//     and their PCIe copies (comm.go exposedComm), and only what that
//     chain outlasts the compute by is nvme (NVMeParamReadSeconds).
// Reads and writes go to the same drives one after the other, so their
// times add.

// NVMeSeconds is the NVMe time of a step moving io on one rank, with
// ranks ranks of the node (at least 1) doing the same.
func NVMeSeconds(plan *core.Plan, io replay.NVMeIO, ranks int64) float64 {
	if io.Total() <= 0 {
		return 0
	}
	read, write := plan.Cluster.NVMeRates()
	reads := float64(io.StepRead + io.ParamRead)
	writes := float64(io.GradWrite + io.StepWrite + io.ParamWrite)
	return float64(max(ranks, 1)) * (reads/read + writes/write)
}

// NVMeParamReadSeconds is the part of NVMeSeconds that reads parameter
// partitions before their gathers, prefetched in the chain of the
// gathers (exposedComm), where the rest is serial.
func NVMeParamReadSeconds(plan *core.Plan, io replay.NVMeIO, ranks int64) float64 {
	return NVMeSeconds(plan, replay.NVMeIO{ParamRead: io.ParamRead}, ranks)
}
