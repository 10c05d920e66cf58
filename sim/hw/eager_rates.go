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
//   - Upcast: a dtype copy from a 2-byte float (bf16, fp16) to fp32
//     (autocast's fp32 copies, .float(), .to(torch.float32)). On CUDA
//     builds direct_copy_kernel_cuda (aten/src/ATen/native/cuda/Copy.cu)
//     has vectorized no-cast kernels for fp32 to bf16 and fp16 only
//     (bfloat16_copy_kernel_cuda, float16_copy_kernel_cuda); the other
//     direction falls to gpu_kernel with dynamic casting, which loads
//     and converts an element at a time (its vectorized
//     bfloat16tofloat32_copy_kernel_cuda is under #ifdef USE_ROCM).
//     fp16 takes the same path as the bf16 measured.
//
// Fractions are not fitted to step times: each is the median of the
// kernel's back-to-back times over the measured shapes and runs
// (sim/timing TestH200EagerAttentionKernels has the rows).
type EagerKernels struct {
	MaskedFill, SoftmaxShort, SoftmaxLong, Upcast float64
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
//     GB/s, median 1,874: 0.527;
//   - to(fp32) of bf16 scores ([8,16,1024,1024] and [4,32,2048,2048],
//     6 bytes an element): 2,128, 2,158, 2,081 and 2,107 GB/s, median
//     2,117.7: 0.595 (fp32 to bf16 was not timed: its kernel is the
//     vectorized one, left at the stream rate).
var h200Eager = EagerKernels{MaskedFill: 0.311, SoftmaxShort: 0.719, SoftmaxLong: 0.527, Upcast: 0.595}

// SoftmaxShortRow is the longest row SoftmaxShort prices: the rows of
// 1,024 measured (the torch.profiler kernel softmax_warp_forward<...,
// 10, ...>, 2^10 elements a row).
const SoftmaxShortRow = 1024

// withEager is k with the eager attention kernels e.
func (k KernelRates) withEager(e EagerKernels) KernelRates {
	k.Eager = e
	return k
}
