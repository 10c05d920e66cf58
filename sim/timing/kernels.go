package timing

import (
	"math"

	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// Kernel prices: the GPU time of one kernel from its shape, on a device
// and its published kernel rates (hw.KernelRates).
//
// GEMM. A GEMM reads its operands and writes its result through HBM and
// multiplies on the tensor cores, overlapped: its time is the larger of
// the compute time (FLOPs at the device's measured maximum achievable
// matmul rate, MAMF) and the memory time (operands and result at the
// measured copy bandwidth). Checked against OpenXLA's measured H100 GEMM
// table (xla/service/gpu/model/matmul_interpolator_data.h, sm_90, bf16)
// in kernels_test.go: median error 4 %, worst 32 % (skinny GEMMs with a
// long K, where cuBLAS splits K and adds a reduction). GEMMs get no wave
// quantization: with fixed 128 x 128 tiles over the 132 SMs the same
// table's median error doubles and its worst reaches 130 %, because
// cuBLAS picks the tile shape and split-K per shape.
//
// Attention. Flash-attention kernels run at the fraction of peak their
// published curves give for the sequence, head dim 128, with and without
// a causal mask (hw.AttnKernel), less wave quantization: each thread
// block takes 128 query rows of one head, and a last partial wave of
// blocks over the SMs leaves SMs idle (the published curves ran 2,048
// blocks, 97 % of full waves on an H100; quantization is relative to
// that).
//
// Everything else streams its bytes at the measured copy bandwidth.
// No kernel takes less than kernelFloor.

// kernelFloor is the least GPU time of a kernel: launch latency, block
// scheduling and the tail of a grid that does almost nothing. NVIDIA's
// CUDA Graphs post (developer.nvidia.com/blog/cuda-graphs, 2019) times a
// 2.9 µs kernel at 3.8 µs per launch back to back in a stream: about
// 1 µs of overhead on top of a kernel that already does little; 2 µs is
// taken for the smallest kernels.
const kernelFloor = 2e-6

// attnBlockRows is the query rows per thread block of FlashAttention-2
// and -3's forward kernels (kBlockM = 128 for head dim 128).
const attnBlockRows = 128

// publishedWaveFill is the wave fill of the published attention curves:
// 2,048 blocks (16k tokens, 16 heads of 128, 128 rows a block) over an
// H100's 132 SMs fill 2048/(16*132) = 97 % of their waves.
const publishedWaveFill = 2048.0 / (16 * 132)

// peakFLOPS is the dense peak for matmuls in dtype dt, FLOP/s.
func peakFLOPS(d *hw.Device, dt units.DType) float64 {
	switch dt {
	case units.FP32:
		if d.FP32TFLOPS > 0 {
			return d.FP32TFLOPS * 1e12
		}
		return d.BF16TFLOPS * 1e12 / 16
	case units.TF32:
		return d.BF16TFLOPS * 1e12 / 2
	case units.FP8:
		if d.FP8TFLOPS > 0 {
			return d.FP8TFLOPS * 1e12
		}
	}
	return d.BF16TFLOPS * 1e12
}

// gemmRate is the matmul throughput a large GEMM reaches in dtype dt,
// FLOP/s: the peak times the measured MAMF fraction (fp8's and fp32's own
// where measured; otherwise, and for tf32, the bf16 fraction: on an H200
// TF32 reaches 0.790 of its peak against bf16's 0.803,
// timing/h200_measured_test.go).
func gemmRate(d *hw.Device, dt units.DType) float64 {
	r := d.RatesRef()
	f := r.GEMM
	switch {
	case dt == units.FP8 && d.FP8TFLOPS > 0 && r.GEMMFP8 > 0:
		f = r.GEMMFP8
	case dt == units.FP32 && d.FP32TFLOPS > 0 && r.GEMMFP32 > 0:
		f = r.GEMMFP32
	}
	return peakFLOPS(d, dt) * f * r.Sustain
}

// streamRate is the bandwidth a streaming kernel reaches, bytes/s (0 when
// the device has no HBM figure).
func streamRate(d *hw.Device) float64 {
	return d.HBMGBps * 1e9 * d.RatesRef().HBM
}

// kernelTime is one kernel's GPU time: the larger of its compute time c
// and memory time m, at least kernelFloor; and what bounds it.
func kernelTime(c, m float64) (sec float64, bound Bound) {
	t := max(c, m)
	switch {
	case t < kernelFloor:
		return kernelFloor, BoundLaunch
	case c >= m:
		return t, BoundCompute
	}
	return t, BoundMemory
}

// gemmTime is the GPU time of b GEMMs of (m x k) by (k x n) with inputs
// of in bytes per element and outputs of out bytes per element.
func gemmTime(d *hw.Device, dt units.DType, b, m, n, k, in, out float64) (float64, Bound) {
	c := 2 * b * m * n * k / gemmRate(d, dt)
	var mem float64
	if s := streamRate(d); s > 0 {
		mem = b * ((m*k+k*n)*in + m*n*out) / s
	}
	return kernelTime(c, mem)
}

// streamTime is the GPU time of a kernel streaming bytes.
func streamTime(d *hw.Device, bytes float64) (float64, Bound) {
	s := streamRate(d)
	if s <= 0 {
		return kernelFloor, BoundLaunch
	}
	return kernelTime(0, bytes/s)
}

// attnShape is what prices an attention kernel: its FLOPs (forward), the
// sequence, whether it is causal and its thread blocks.
type attnShape struct {
	flops  float64
	seq    float64
	causal bool
	blocks float64 // batch x heads x ceil(seq / attnBlockRows)
}

// attentionTime is the GPU time of a flash-attention forward (or its
// backward, 2.5 times the forward's FLOPs: five matmuls against two) with
// kernel k.
func attentionTime(d *hw.Device, dt units.DType, k hw.AttnKernel, a attnShape, backward bool) (float64, Bound) {
	f := a.flops
	if backward {
		f *= attnBackwardFLOPs
	}
	r := d.RatesRef()
	frac := k.Pass(backward, a.causal).At(a.seq) * r.Sustain * waveFill(a.blocks, r.SMs) / publishedWaveFill
	if frac <= 0 {
		return kernelFloor, BoundLaunch
	}
	return kernelTime(f/(peakFLOPS(d, dt)*min(frac, 1)), 0)
}

// attnBackwardFLOPs is FlashAttention's backward over its forward: five
// matmuls (recomputing S, then dP, dV, dQ, dK) against two (Dao 2023,
// section 3.1.2; the FlashAttention papers count backward FLOPs as 2.5x).
const attnBackwardFLOPs = 2.5

// waveFill is the share of SM slots busy over the waves of blocks blocks
// on sms SMs: blocks / (ceil(blocks/sms) * sms).
func waveFill(blocks float64, sms int) float64 {
	if blocks <= 0 || sms <= 0 {
		return 1
	}
	s := float64(sms)
	return blocks / (math.Ceil(blocks/s) * s)
}
