package hw

// KernelRates is what a GPU's kernels reach in practice, as fractions of
// the Device's peaks, from published kernel benchmarks. The time model
// (sim/timing) prices every op from these; a zero KernelRates (a custom
// gpu()) takes DefaultKernelRates.
type KernelRates struct {
	SMs int // streaming multiprocessors (wave quantization of attention kernels)
	// GEMM is the largest dense bf16/fp16 matmul throughput measured, over
	// BF16TFLOPS: the "maximum achievable matmul FLOPS" (MAMF) of
	// stas00/ml-engineering compute/accelerator/README.md (mamf-finder.py,
	// the mean of 100 iterations at the best shape found).
	GEMM float64
	// GEMMFP8 likewise for float8_e4m3fn inputs, over FP8TFLOPS.
	GEMMFP8 float64
	// GEMMFP32 likewise for fp32 GEMMs without TF32 (PyTorch's default,
	// allow_tf32 off), over FP32TFLOPS; 0 where unmeasured: GEMM's fraction.
	GEMMFP32 float64
	// HBM is the fraction of HBMGBps a streaming copy kernel reaches.
	HBM float64
	// L2 is the chip's L2 cache, bytes; 0 where memsh has no figure (no
	// reuse of gathered rows is priced then).
	L2 int64
	// Graph is what PyTorch's eager gather, scatter and broadcast kernels
	// of PyG's message passing reach (graph_rates.go); zero where
	// unmeasured.
	Graph GraphKernels
	// Eager is what eager attention's masked_fill and softmax reach, as
	// fractions of the streaming rate (eager_rates.go); zero where
	// unmeasured.
	Eager EagerKernels
	// PCIe is the fraction of the Device's PCIeGBps a copy between device
	// memory and pinned (page-locked) host memory reaches through the copy
	// engines (cudaMemcpyAsync, what PyTorch's copy_ and .to() run):
	// offloaded activations, optimizer states and parameters.
	PCIe float64
	// Sustain is the fraction of the isolated GEMM and attention rates
	// above that the same kernels keep through a training step: the
	// benchmarks run one kernel for a second or so, a training step runs
	// for minutes at the power limit with NCCL kernels sharing the SMs. It
	// is the time model's one fitted term, fitted per GPU generation to the
	// calibration rows of sim/calib_step_test.go (rows not marked held out).
	Sustain float64
	// Flash is the flash-attention kernel PyTorch runs (flash-attn 2,
	// torch SDPA's flash backend); Fused the vendor's fused attention
	// (Transformer Engine's cuDNN kernel, FlashAttention-3 on Hopper),
	// which dispatch="fused" plans run.
	Flash, Fused AttnKernel
	// SDPA is the kernel torch's scaled_dot_product_attention runs on this
	// GPU where the runtime prefers cuDNN's attention (core.Runtime.SDPACuDNN:
	// check_prefer_cudnn_attention in aten/src/ATen/native/transformers/
	// cuda/sdp_utils.cpp, sm90 and sm100 with cuDNN 9.15.1 or later,
	// which torch 2.11's wheels bundle); unset (Name ""), Flash.
	SDPA   AttnKernel
	Source string
}

// AttnKernel is an attention kernel's throughput as a fraction of the
// dense bf16 peak, forward and backward, with and without a causal mask.
// Each grows with the sequence s as Max * s / (s + S0): the per-row work
// outside the matmuls (loading Q, writing O and the log-sum-exp, the
// softmax rescaling) weighs less as rows get longer; a causal mask halves
// the work per row, so S0 is larger. Max and S0 are fitted to the
// published curves named below (sequence 512 to 16k, the largest relative
// error of the fit in the comment; sim/hw/kernels_test.go checks them).
type AttnKernel struct {
	Name                           string
	Fwd, FwdCausal, Bwd, BwdCausal Saturation
}

// Saturation is Max * s / (s + S0).
type Saturation struct {
	Max, S0 float64
}

// At is the fraction of peak at sequence s.
func (c Saturation) At(s float64) float64 {
	if s <= 0 {
		return 0
	}
	return c.Max * s / (s + c.S0)
}

// Pass is the curve of the forward or backward, with or without a causal
// mask.
func (k AttnKernel) Pass(backward, causal bool) Saturation {
	switch {
	case backward && causal:
		return k.BwdCausal
	case backward:
		return k.Bwd
	case causal:
		return k.FwdCausal
	}
	return k.Fwd
}

// The attention kernels. Curves from the FlashAttention-3 paper (Shah et
// al. 2024, arXiv:2407.08608, figures "Attention forward/backward speed,
// head dim 128 (H100 80GB SXM5)", bf16; the bar labels as transcribed at
// subtext.edge.nugit.net, SECONDARY), TFLOP/s at 512, 1k, 2k, 4k, 8k, 16k:
//
//	forward                FlashAttention-2  309 350 362 368 370 370  (fit 1.8 %)
//	                       FlashAttention-3  467 565 625 638 646 648  (fit 2.5 %)
//	forward, causal        FlashAttention-2  191 260 298 319 333 335  (fit 3.0 %)
//	                       FlashAttention-3  292 423 521 579 602 616  (fit 2.8 %)
//	backward               FlashAttention-2  214 260 291 310 318 322  (fit 0.5 %)
//	                       FlashAttention-3  316 424 501 542 559 561  (fit 2.4 %)
//
// The causal backward has no published curve here: it keeps the
// forward's causal-to-plain ratios of Max and S0 (an assumption).
var (
	// flash-attn 2 on Hopper: the curves above over 989 TFLOP/s.
	fa2Hopper = AttnKernel{Name: "FlashAttention-2",
		Fwd: Saturation{0.383, 105}, FwdCausal: Saturation{0.356, 405},
		Bwd: Saturation{0.333, 275}, BwdCausal: Saturation{0.310, 1061}}
	// FlashAttention-3 (cuDNN's fused attention, which Transformer Engine
	// runs, is within 10 % of it from 2k on in the same figures) on Hopper.
	fa3Hopper = AttnKernel{Name: "FlashAttention-3",
		Fwd: Saturation{0.679, 210}, FwdCausal: Saturation{0.664, 610},
		Bwd: Saturation{0.596, 420}, BwdCausal: Saturation{0.583, 1220}}
	// cuDNN's fused attention as torch 2.11's SDPA runs it by default on
	// Hopper (backward node ScaledDotProductCudnnAttentionBackward0),
	// measured on one H200 (sim/testdata/cuda_h200, extra.jsonl part
	// "sdpa", tools/oracle/cuda_run.sh): causal, head dim 128, 32 heads,
	// b x s = 16,384 tokens (4,096 blocks of 128 rows: the published
	// curves' wave fill), TFLOP/s at 1k, 2k, 4k, 8k, 16k, each call less
	// the harness's 21.1 µs (timing's h200CallOverhead) and the backward
	// less the three gradient accumulations into q, k and v (an add_ each,
	// at the measured add rate):
	//
	//	forward, causal   448 543 598 615 643  (fit 1.3 %)
	//	backward, causal  321 412 485 488 510  (fit 3.9 %)
	//
	// (FlashAttention-3's causal curves above: 423 521 579 602 616
	// forward.) The causal curves are these fits; the plain ones, not
	// measured, are FlashAttention-3's.
	cudnnHopper = AttnKernel{Name: "cuDNN attention",
		Fwd: Saturation{0.679, 210}, FwdCausal: Saturation{0.666, 462},
		Bwd: Saturation{0.596, 420}, BwdCausal: Saturation{0.561, 783}}
	// flash-attn 2 on Ampere: the FlashAttention-2 paper (Dao 2023,
	// arXiv:2307.08691, abstract and section 4.1) reaches up to 73 % of
	// the A100's peak forward and 63 % backward; the shape in s (S0, the
	// causal ratio 0.93) is the same kernel's on Hopper above.
	fa2Ampere = AttnKernel{Name: "FlashAttention-2",
		Fwd: Saturation{0.73, 105}, FwdCausal: Saturation{0.679, 405},
		Bwd: Saturation{0.63, 275}, BwdCausal: Saturation{0.586, 1061}}
	// GPUs before Ampere: torch SDPA's memory-efficient kernel (flash-attn
	// 2 needs Ampere or later), taken at FlashAttention-1's "25-40 % of
	// peak" (as the FlashAttention-2 abstract sums it up), with
	// FlashAttention-2's shape in s; an assumption.
	memEfficient = AttnKernel{Name: "memory-efficient attention",
		Fwd: Saturation{0.40, 105}, FwdCausal: Saturation{0.372, 405},
		Bwd: Saturation{0.35, 275}, BwdCausal: Saturation{0.326, 1061}}
)

// The fitted Sustain of each generation (KernelRates.Sustain): the
// median over the calibration rows of that generation's GPUs of the
// factor that makes memsh's step match the published one, to two digits
// (sim/calib_step_test.go prints the rows). GPUs without a calibration
// row take the mean.
//
// What it stands for, as far as published figures say. The MAMF fractions
// are bursts: the mean of 100 iterations of one shape after 50 warm-ups
// (the MAMF table's header), and mamf-finder's version 4 reports MAMF at
// the boost clock beside a new MSMF, "the highest throughput a shape
// holds steady over a 2s window under full load (matches sustained
// training throughput)" (stas00/ml-engineering compute/accelerator/
// benchmarks/mamf-finder.py); no MSMF table is published yet. A training
// step runs its GEMMs for minutes at the board's power limit, where the
// clock settles below boost and random data draws more switching power
// than a benchmark's: H. He measured an A100's 8192^3 bf16 matmul at 257
// TFLOP/s on torch.randn inputs against 295 on zeros, power-limited
// (thonking.ai, "Strangely, Matrix Multiplications on GPUs Run Faster When
// Given 'Predictable' Data!", 2024); 257 is 0.95 of the A100's MAMF
// (271.2), a quarter of Ampere's 0.19 below 1. NVIDIA's own HPL figures
// take the A100 at the clock it sustains at its power limit, 1,305 MHz
// against its 1,410 MHz boost (G. Lockwood, "Peak FLOPS",
// glennklockwood.com/garden/peak-FLOPS): 0.93, the same part by the
// clock. The rest is what the model
// does not price, lumped: training GEMM shapes below the best shape's
// rate beyond their memory bound, NCCL kernels holding SMs while
// communication overlaps compute, host stalls. Sustain stays fitted until
// an MSMF figure per GPU is published to replace its first part.
//
// Refit December 2026 (0.83 -> 0.80, 0.74 -> 0.73; the rows' own values
// 0.795 and 0.725): the lump had held the elementwise backward the
// general rule overpriced until adds, casts and gradient sums took
// autograd's rules (sim/timing/backward.go). Refit again (Ampere 0.80 ->
// 0.81, the rows' own values 0.810 and 0.732) when the calibration rows
// were written as their runs ran (Megatron's examples/sc21 scripts,
// Composer's train metrics, clipping and reduce-scatters, flash-attn's
// fused loss) and eager cross_entropy took its kernels' bytes: published
// rows' median error 3.4 -> 3.7 %, held-out 2.8 -> 2.3 %
// (docs/time.md, "Why the Ampere rows split").
const (
	ampereSustain = 0.81
	hopperSustain = 0.73
	otherSustain  = (ampereSustain + hopperSustain) / 2
)

// Measured on one H200 (sim/testdata/cuda_h200, extra.jsonl section
// "kernels", tools/oracle/cuda_extra.py run by tools/oracle/cuda_run.sh;
// timing/h200_measured_test.go compares every row with memsh). Each call
// was timed alone between two CUDA events, which also hold the CPU's
// dispatch of the call: 21.1 µs, the smallest GEMMs' time beyond their
// kernels; the fractions below are of the calls less that.
//
//   - fp8 (torch._scaled_mm, e4m3, bf16 out): 8192^3, 16384 x 14336 x
//     4096 and 16384 x 4096 x 14336 at 1,434, 1,423 and 1,427 TFLOP/s of
//     1,979, the median 0.721 (the MAMF table's H200 row, 1,453.4, was
//     0.734; its H100 row, 0.709, is kept: within 2 % of this).
//   - fp32 without TF32: 4096^3 and 8192^3 at 50.2 and 50.9 TFLOP/s of
//     66.9, the median 0.756 (memsh took bf16's 0.803 before).
//   - streaming kernels: memsh prices every elementwise, norm and
//     optimizer kernel as its bytes at one rate. PyTorch's kernels reach
//     different rates on 2^28 bf16 elements: copy 4,236 GB/s, add 4,502,
//     silu(x) * y 4,275 (two kernels), rms_norm 3,651, gelu 3,258,
//     layer_norm 2,832 (the last three do arithmetic or reductions per
//     element beyond their bytes), and AdamW's steps on 0.87 and 0.97 B
//     fp32 parameters for-loop, foreach and fused 3,029-4,075 (their
//     bytes as timing/optimizer.go counts them). h200HBM is the median of
//     the twelve over the 4,800 GB/s peak: the rate at which memsh's
//     price of the median kernel is right. A copy kernel alone, what the
//     other GPUs' figures are, reaches 0.88 here.
const (
	h200FP8  = 0.721
	h200FP32 = 0.756
	h200HBM  = 0.741
)

// Pinned host copies over the GPU's PCIe link, measured:
//
//   - PCIe Gen5 x16 (H100/H200): "approximately 49 GB/s per GPU", NVIDIA's
//     own measurement on a DGX-H100 (mlcommons/inference_results_v3.1,
//     closed/NVIDIA/documentation/start_from_device/dgx-h100.md; transfers
//     between the NIC and the GPU over the same Gen5 x16 link), 0.77 of 64
//     GB/s; nvbandwidth's device_to_host_memcpy_sm on an H100 cluster
//     reads 52.8 GB/s (NVIDIA/nvbandwidth issue 24), 0.82.
//   - PCIe Gen4 x16 (A100): CUDA's bandwidthTest with pinned memory on an
//     A100-PCIE-40GB, 26.2 GB/s both ways from 200 MB transfers on
//     (jdh4/della-gpu-A100 README), 0.82 of 32 GB/s.
//
// Other GPUs take pcieDefault, between the two (an assumption).
const (
	pcieHopper  = 49.0 / 64
	pcieAmpere  = 26.2 / 32
	pcieDefault = 0.80
)

// DefaultKernelRates is what a GPU without published kernel figures gets:
// GEMM at the median MAMF efficiency of the NVIDIA data-centre rows of the
// MAMF table (A100 PCIe 81.1 %, H100 80.3 %, B200 77.6 %: 0.80), HBM at
// 0.80 of its peak (between the copy-kernel figures below), FlashAttention-2
// at Ampere's rates. An assumption, named in the time model's notes.
var DefaultKernelRates = KernelRates{SMs: 108, GEMM: 0.80, GEMMFP8: 0.72, Sustain: otherSustain, HBM: 0.80, PCIe: pcieDefault,
	Flash: fa2Ampere, Fused: fa2Ampere,
	Source: "default kernel rates (no published figure for this GPU): GEMM 0.80 of peak, HBM 0.80, FlashAttention-2 at A100's rates, pinned host copies 0.80 of PCIe"}

// Kernel rates of the catalog's GPUs (Catalog sets each device's Kernels).
// HBM copy fractions: V100 785 of 900 GB/s and A100-80GB 1,536 of 2,039
// GB/s measured by memcopy.cu (AnjaliSandip/FastIceFlo
// output/EffectiveMemoryThroughput.md); H100 2,587 of 3,350 GB/s by a
// Triton HBM-to-SMEM copy (hbm_2_smem.py, quoted in the search corpus);
// B200 "> 7.0 TB/s of 7.8" (an HBM3e peak-bandwidth kernel's header).
var (
	voltaRates = KernelRates{SMs: 80, GEMM: 0.80, Sustain: otherSustain, HBM: 0.87, PCIe: pcieDefault, Flash: memEfficient, Fused: memEfficient,
		Source: "V100: 80 SMs; GEMM: default 0.80 (no MAMF row); HBM 785/900 GB/s (FastIceFlo memcopy); " +
			"attention: memory-efficient kernel (flash-attn 2 needs Ampere)"}
	ampereRates = KernelRates{SMs: 108, L2: 40 << 20, GEMM: 0.869, Sustain: ampereSustain, HBM: 0.75, PCIe: pcieAmpere, Flash: fa2Ampere, Fused: fa2Ampere,
		Source: "A100 SXM: 108 SMs; GEMM MAMF 271.2/312 TFLOPS (ml-engineering MAMF table); HBM 1,536/2,039 GB/s " +
			"(FastIceFlo memcopy); FlashAttention-2 paper: 73 % forward, 63 % backward; L2 40 MB in two partitions " +
			"(NVIDIA A100 Tensor Core GPU Architecture whitepaper, \"A100 L2 Cache\"); pinned host copies 26.2/32 GB/s " +
			"(bandwidthTest, A100-PCIE-40GB)"}
	hopperRates = KernelRates{SMs: 132, L2: 50 << 20, GEMM: 0.803, GEMMFP8: 0.709, GEMMFP32: h200FP32, Sustain: hopperSustain, HBM: 0.772, PCIe: pcieHopper, Flash: fa2Hopper, Fused: fa3Hopper, SDPA: cudnnHopper,
		Source: "H100/H200 SXM: 132 SMs; GEMM MAMF 794.5/989 bf16 and 1,402.6/1,979 fp8 (ml-engineering MAMF " +
			"table, \"H200 is the same\"); HBM 2,587/3,350 GB/s (Triton copy); attention: FlashAttention-3 paper " +
			"figures (FlashAttention-2 and -3, H100 SXM5, head dim 128); L2 50 MB in two partitions (NVIDIA H100 " +
			"Tensor Core GPU Architecture whitepaper); pinned host copies ~49/64 GB/s (NVIDIA, DGX-H100); fp32 GEMM " +
			"and torch SDPA's cuDNN attention as measured on an H200 (the same GH100 compute at the same clocks, " +
			"datasheet: 132 SMs, 66.9 TFLOPS fp32; sim/testdata/cuda_h200, tools/oracle/cuda_run.sh)"}
	h200Rates = KernelRates{SMs: 132, L2: 50 << 20, GEMM: 0.803, GEMMFP8: h200FP8, GEMMFP32: h200FP32, Sustain: hopperSustain, HBM: h200HBM, PCIe: pcieHopper, Flash: fa2Hopper, Fused: fa3Hopper, SDPA: cudnnHopper,
		Source: "H200: measured on one H200 (sim/testdata/cuda_h200, tools/oracle/cuda_run.sh; torch 2.11, CUDA 13.0, " +
			"cuDNN 9.19): bf16 GEMM 795/989 at its best shape, as the MAMF table's 794.5 (\"H200 is the same\"); fp8 " +
			"1,427/1,979 (torch._scaled_mm); fp32 50.9/66.9; SDPA's cuDNN attention (causal curves fitted to it); " +
			"streaming kernels: the median of PyTorch's elementwise, norm and AdamW kernels; L2 as H100 (the same GH100 chip)"}
	hopperPCIeRates = KernelRates{SMs: 114, L2: 50 << 20, GEMM: 0.80, GEMMFP8: 0.709, Sustain: hopperSustain, HBM: 0.772, PCIe: pcieHopper, Flash: fa2Hopper, Fused: fa3Hopper, SDPA: cudnnHopper,
		Source: "H100 PCIe/NVL: 114/132 SMs; no MAMF row: default 0.80; otherwise as H100 SXM (fp32 GEMMs at the bf16 fraction: its clocks and power are not the SXM's)"}
	blackwellRates = KernelRates{SMs: 148, GEMM: 0.776, GEMMFP8: 0.763, Sustain: otherSustain, HBM: 0.90, PCIe: pcieDefault, Flash: fa2Hopper, Fused: fa3Hopper,
		Source: "B200: 148 SMs; GEMM MAMF 1,745/2,250 bf16 and 3,432.5/4,500 fp8 (ml-engineering MAMF table); " +
			"HBM > 7.0 of 7.8 TB/s (HBM3e peak kernel); attention: Hopper's curves (no published B200 curve)"}
	mi300Rates = KernelRates{SMs: 304, GEMM: 0.601, GEMMFP8: 0.72, Sustain: otherSustain, HBM: 0.80, PCIe: pcieDefault, Flash: fa2Ampere, Fused: fa2Ampere,
		Source: "MI300X: 304 CUs; GEMM MAMF 781.9/1,300 (ml-engineering MAMF table, ROCm 6.2); fp8 GEMM, HBM and " +
			"attention: defaults (no published figure)"}
	adaRates = KernelRates{SMs: 142, GEMM: 0.80, GEMMFP8: 0.72, Sustain: otherSustain, HBM: 0.80, PCIe: pcieDefault, Flash: fa2Ampere, Fused: fa2Ampere,
		Source: "L40S (AD102): 142 SMs; no MAMF row: defaults"}
	gaRates = KernelRates{SMs: 84, GEMM: 0.80, Sustain: otherSustain, HBM: 0.80, PCIe: pcieDefault, Flash: fa2Ampere, Fused: fa2Ampere,
		Source: "RTX A6000 (GA102): 84 SMs; no MAMF row: defaults"}
)

// withSMs is k on a chip of the same generation with another SM count (a
// cut-down die: the consumer cards enable fewer SMs than the workstation
// part of the same chip).
func (k KernelRates) withSMs(sms int, source string) KernelRates {
	k.SMs, k.Source = sms, source
	return k
}

// Rates is the device's kernel rates, DefaultKernelRates when it has none.
func (d Device) Rates() KernelRates { return *d.RatesRef() }

// RatesRef is Rates by reference, for the pricing that reads the rates of
// every kernel of every program a search lowers: the device and its rates
// copied by value (hundreds of bytes each) were most of gemmTime's,
// gemmRate's and the pricer's matmul's instructions (590 M of
// BenchmarkSearchLlama70B1024's, 110 M by reference; cachegrind,
// collector off). The caller reads it and does not write it.
func (d *Device) RatesRef() *KernelRates {
	if d.Kernels.GEMM <= 0 {
		return &DefaultKernelRates
	}
	return &d.Kernels
}

// H200Sustain is the H200's fitted Sustain (Hopper's), for the tests that
// hold it against the H200's measured kernels.
func H200Sustain() float64 { return h200Rates.Sustain }
