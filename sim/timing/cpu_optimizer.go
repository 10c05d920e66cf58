package timing

import "github.com/memsh/memsh/sim/core"

// The CPU optimizer step of ZeRO-Offload (offload(optimizer="cpu") or
// "nvme", one GPU or ZeRO stages 1-3): DeepSpeedCPUAdam steps the rank's
// fp32 partition on the host after the backward, and the next forward
// waits for the updated 16-bit parameters (DeepSpeed's default schedule;
// its opt-in delayed parameter update, which overlaps the step with the
// next forward and backward, is not modelled). The step is priced by the
// host memory it streams, at the node's host bandwidth
// (hw.Cluster.HostRate), shared by the GPUs of the node: each rank steps
// its own partition at the same time on the same sockets.
//
// Bytes per element of the partition, read from DeepSpeed at commit
// edaa722 (0.19.6):
//
//   - the update (csrc/includes/cpu_adam.h, Adam_Optimizer::Step_AVX):
//     loads the fp32 gradient, exp_avg, exp_avg_sq and parameter, stores
//     the parameter, exp_avg and exp_avg_sq: 4+4+4 bytes for the
//     parameter and gradient and twice the state (2 x 8 for Adam's two
//     fp32 moments). Other optimizers are priced with their own state
//     bytes over the same pattern (an approximation);
//   - the 16-bit copy of the updated values: stages 1-2 cast the fp32
//     partition into the 16-bit CPU staging buffer
//     (deepspeed/runtime/zero/stage_1_and_2.py, step: bit16_partition_buffer
//     .data.copy_(fp32_partition.data)); stage 3 copies the fp32 partition
//     into the GPU's 16-bit partition (stage3.py,
//     _reassign_or_swap_out_partitioned_parameters), a cross-device copy
//     with a cast that PyTorch casts on the source's device first: either
//     way the host reads 4 bytes and writes the parameter dtype's.
//
// Not counted: unscale_and_clip_grads' in-place multiply of the fp32
// gradient partition (run only when the loss scale or clipping makes the
// combined scale differ from 1), and the host's compute (AVX-512 keeps
// the update memory-bound: a few dozen flops per 28-30 bytes). FSDP's
// CPU offload (FSDP2's CPUOffloadPolicy, FSDP1's CPUOffload) runs torch's
// optimizer on the host instead, priced by
// its own passes (torch_cpu_optimizer.go).

// CPUOptimizerBytes is the host memory bytes DeepSpeedCPUAdam's step
// streams per element of the partition under plan's optimizer and
// precision: the master and its gradient in the master's dtype (fp32, or
// bf16_master_weights_and_grads' bf16), the state in the host's
// (core.Precision.ZeroHostStates).
func CPUOptimizerBytes(plan *core.Plan) float64 {
	const n = 1 << 20 // any size: the state bytes per element
	var state int64
	for _, s := range plan.Optimizer.States([]int64{n}, n, plan.Precision.ZeroHostStates()) {
		state += s.Bytes
	}
	param := float64(plan.Precision.ZeroMaster().Bytes(1))
	update := 3*param + 2*float64(state)/n                             // read param and grad, write param; read and write the state
	cast := param + float64(plan.Precision.Params.Bytes(n))/float64(n) // the 16-bit copy of the updated partition
	return update + cast
}

// CPUOptimizerSeconds is the CPU step of a rank stepping elements on the
// host, with the node's other GPUs (ranks on the host, at least 1)
// stepping partitions of the same size at the same time.
func CPUOptimizerSeconds(plan *core.Plan, elements float64, ranks int64) float64 {
	if elements <= 0 {
		return 0
	}
	return float64(max(ranks, 1)) * elements * CPUOptimizerBytes(plan) / plan.Cluster.HostRate(plan.Device)
}

// RanksPerHost is the number of a plan's GPUs on one node: the cluster's
// gpus_per_node, or fewer when the layout has fewer GPUs.
func RanksPerHost(plan *core.Plan) int64 {
	gpus := plan.Parallel.Norm().GPUs()
	return min(plan.Cluster.Norm(gpus).GPUsPerNode, max(gpus, 1))
}
