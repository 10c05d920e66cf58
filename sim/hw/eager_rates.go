package hw

// EagerKernels is what PyTorch's eager elementwise kernels of explicit
// (eager) attention reach on a GPU where they were measured, each as a
// fraction of the streaming rate (HBMGBps x KernelRates.HBM, the median
// of the elementwise, norm and AdamW kernels): timing prices the forward
// of such an op as its bytes at stream rate x fraction. A zero fraction
// (every GPU without a measurement) leaves the op at the stream rate.
//
// Only kernels that sit clearly off the stream rate for a nameable
// reason are recorded:
//
//   - MaskedFill: masked_fill over a broadcast bool mask ([s, s] against
//     [b, h, s, s] scores, eager attention's causal mask). A broadcast
//     operand leaves TensorIterator without a contiguous layout, so the
//     kernel is the generic elementwise_kernel<128, 4> (per-element index
//     arithmetic, no vector loads), not vectorized_elementwise_kernel.
//   - SoftmaxShort: softmax over rows of at most 1,024 elements, 2-byte
//     in and out (torch.profiler names softmax_warp_forward: one warp per
//     row, the row held in registers); SoftmaxLong over longer rows
//     (measured at 2,048). Both reduce each row (its max, then its sum of
//     exponentials) before they write it; the longer rows run slower,
//     a cause the measurement does not isolate.
//
// Fractions are not fitted to step times: each is the median of the
// kernel's back-to-back times over the measured shapes and runs
// (sim/timing TestH200EagerAttentionKernels has the rows).
type EagerKernels struct {
	MaskedFill, SoftmaxShort, SoftmaxLong float64
}

// h200Eager: measured on one H200 (sim/testdata/cuda_h200, profile.jsonl
// and profile_repeat.jsonl, part "eager", tools/oracle/cuda_profile.py,
// runs 4 and 6; torch 2.11.0+cu130), bf16, back to back (no harness
// overhead), over the H200's stream rate 0.741 x 4,800 = 3,556.8 GB/s:
//
//   - masked_fill, broadcast bool mask, [8,16,1024,1024] and
//     [4,32,2048,2048]: 1,068-1,136 GB/s, median 1,106.7: 0.311;
//   - softmax bf16, rows of 1,024 ([8,16,1024,1024]): 2,527 and 2,588
//     GB/s, median 2,557: 0.719;
//   - softmax bf16, rows of 2,048 ([4,32,2048,2048]): 1,888 and 1,859
//     GB/s, median 1,874: 0.527.
var h200Eager = EagerKernels{MaskedFill: 0.311, SoftmaxShort: 0.719, SoftmaxLong: 0.527}

// SoftmaxShortRow is the longest row SoftmaxShort prices: the rows of
// 1,024 measured (the torch.profiler kernel softmax_warp_forward<...,
// 10, ...>, 2^10 elements a row).
const SoftmaxShortRow = 1024

// withEager is k with the eager attention kernels e.
func (k KernelRates) withEager(e EagerKernels) KernelRates {
	k.Eager = e
	return k
}
