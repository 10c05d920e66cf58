package timing

import (
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// xlaGEMMs are measured H100 bf16 GEMMs from OpenXLA's matmul
// interpolator table (tensorflow/tensorflow third_party/xla/xla/service/
// gpu/model/matmul_interpolator_data.h @372d578, key "sm_90", flops of
// "bf16xbf16->bf16"): batch, M, N, K and the measured TFLOP/s.
var xlaGEMMs = [][5]float64{
	{1, 1024, 2048, 256, 139.519}, {2, 256, 2048, 2048, 332.248}, {1, 256, 2048, 256, 41.838}, {4, 512, 256, 256, 42.367},
	{1, 4096, 512, 512, 238.822}, {4, 4096, 256, 2048, 588.674}, {1, 512, 256, 512, 21.789}, {2, 2048, 256, 512, 139.230},
	{2, 1024, 2048, 1024, 493.448}, {1, 256, 2048, 4096, 285.874}, {2, 512, 2048, 2048, 525.314}, {4, 1024, 2048, 2048, 712.739},
	{1, 4096, 1024, 512, 343.707}, {1, 2048, 2048, 2048, 631.985}, {4, 256, 256, 256, 22.550}, {2, 256, 256, 1024, 36.954},
	{1, 256, 512, 4096, 91.679}, {1, 256, 1024, 256, 22.672}, {1, 4096, 4096, 256, 392.163}, {2, 256, 1024, 2048, 216.132},
	{2, 2048, 4096, 1024, 678.724}, {2, 4096, 512, 256, 211.034}, {2, 4096, 4096, 2048, 763.011}, {1, 4096, 4096, 4096, 783.329},
	{1, 512, 4096, 1024, 373.346}, {1, 512, 256, 4096, 91.057}, {1, 256, 1024, 4096, 172.295}, {1, 4096, 2048, 512, 447.020},
	{1, 4096, 256, 4096, 376.223}, {1, 1024, 1024, 4096, 470.115}, {1, 512, 4096, 4096, 644.116}, {1, 4096, 256, 256, 82.241},
	{1, 512, 512, 512, 40.721}, {2, 1024, 4096, 4096, 747.739}, {1, 2048, 1024, 4096, 653.128}, {4, 256, 256, 4096, 171.634},
	{1, 1024, 512, 4096, 298.926}, {2, 1024, 1024, 1024, 373.866}, {1, 4096, 4096, 1024, 677.440}, {1, 1024, 1024, 256, 82.040},
}

// xlaCallFloor is the time of XLA's smallest measured GEMMs (256 x 512 x
// 256 in 5.9 µs): launch and timing overhead per call, which its table
// includes and a kernel inside a training step's stream does not.
const xlaCallFloor = 5.5e-6

// The GEMM model (max of compute at MAMF and memory at the copy bandwidth)
// against XLA's measured table: median error 4 %, none beyond 33 %.
func TestGEMMAgainstXLATable(t *testing.T) {
	d, _ := hw.LookupDevice("H100")
	d.Kernels.Sustain = 1 // an isolated kernel, as XLA measured it
	var errs []float64
	for _, g := range xlaGEMMs {
		b, m, n, k, tflops := g[0], g[1], g[2], g[3], g[4]
		measured := 2 * b * m * n * k / (tflops * 1e12)
		// gemmTime's own max(compute, memory), before its 2 µs floor, which
		// XLA's per-call floor already holds
		c := 2 * b * m * n * k / gemmRate(&d, units.BF16)
		mem := b * (m*k + k*n + m*n) * 2 / streamRate(&d)
		if got, _ := gemmTime(&d, units.BF16, b, m, n, k, 2, 2); got != max(c, mem, kernelFloor) {
			t.Fatalf("gemmTime %g, want max(%g, %g, floor)", got, c, mem)
		}
		errs = append(errs, math.Abs((max(c, mem)+xlaCallFloor)/measured-1))
	}
	sort.Float64s(errs)
	med, worst := (errs[len(errs)/2-1]+errs[len(errs)/2])/2, slices.Max(errs)
	t.Logf("%d GEMMs: median error %.1f %%, worst %.1f %%", len(errs), 100*med, 100*worst)
	if med > 0.05 || worst > 0.33 {
		t.Errorf("GEMM model against XLA's H100 table: median %.1f %%, worst %.1f %% (want <= 5 %%, <= 33 %%)", 100*med, 100*worst)
	}
}

// Hand-counted kernel prices on an H100 (989.4 TFLOP/s bf16 at MAMF
// 0.803 and Sustain 0.73; 3,350 GB/s at 0.772).
func TestKernelPrices(t *testing.T) {
	d, _ := hw.LookupDevice("H100")
	rate := 989.4e12 * 0.803 * 0.73
	bw := 3350e9 * 0.772
	sec, b := gemmTime(&d, units.BF16, 1, 8192, 8192, 8192, 2, 2)
	if want := 2 * 8192.0 * 8192 * 8192 / rate; math.Abs(sec/want-1) > 1e-9 || b != BoundCompute {
		t.Errorf("8192^3 GEMM: %g s %v, want %g s compute-bound", sec, b, want)
	}
	// A GEMV-like shape: 16 rows against a 8192 x 8192 weight reads the
	// weight: memory-bound.
	sec, b = gemmTime(&d, units.BF16, 1, 16, 8192, 8192, 2, 2)
	if want := (16*8192*2 + 8192*8192*2 + 16*8192*2) / bw; math.Abs(sec/want-1) > 1e-9 || b != BoundMemory {
		t.Errorf("16 x 8192 x 8192 GEMM: %g s %v, want %g s memory-bound", sec, b, want)
	}
	sec, b = streamTime(&d, 1e3)
	if sec != kernelFloor || b != BoundLaunch {
		t.Errorf("a 1 kB kernel: %g s %v, want the %g s floor", sec, b, kernelFloor)
	}
	// Causal FlashAttention-3 forward at 4k on 32 heads x 32 blocks = 1024
	// blocks: 8 waves on 132 SMs (fill 0.97, the published curves' own).
	a := attnShape{flops: 1e12, seq: 4096, causal: true, blocks: 32 * 32}
	sec, _ = attentionTime(&d, units.BF16, d.Kernels.Fused, a, false)
	frac := 0.664 * 4096 / (4096 + 610) * 0.73 * (1024.0 / (8 * 132)) / publishedWaveFill
	if want := 1e12 / (989.4e12 * frac); math.Abs(sec/want-1) > 1e-9 {
		t.Errorf("FA3 causal forward: %g s, want %g s", sec, want)
	}
	if bwd, _ := attentionTime(&d, units.BF16, d.Kernels.Fused, a, true); bwd <= 2.5*sec {
		t.Errorf("the backward (2.5x the FLOPs, a lower rate) must take more than 2.5x the forward: %g vs %g", bwd, sec)
	}
}

// fp8 GEMMs run at the fp8 peak and its own MAMF (H100: 1,402.6 of 1,979
// TFLOP/s); bf16 at the bf16 peak and its MAMF.
func TestFP8GEMMRate(t *testing.T) {
	d, _ := hw.LookupDevice("H100")
	s := d.Kernels.Sustain
	if got, want := gemmRate(&d, units.FP8), 1979e12*0.709*s; math.Abs(got/want-1) > 1e-9 {
		t.Errorf("fp8 rate %g, want %g", got, want)
	}
	if got, want := gemmRate(&d, units.BF16), 989.4e12*0.803*s; math.Abs(got/want-1) > 1e-9 {
		t.Errorf("bf16 rate %g, want %g", got, want)
	}
	a100, _ := hw.LookupDevice("A100")
	if gemmRate(&a100, units.FP8) != gemmRate(&a100, units.BF16) {
		t.Error("a GPU without fp8 runs an fp8 GEMM at its bf16 rate")
	}
}

// PyTorch's eager elementwise kernels on an H200 reach memsh's stream
// rate (4,800 GB/s at 0.741, the median of the kernels measured on an
// H200: 3,557 GB/s, sim/hw kernels.go) on contiguous operands:
// tile-ai/TileOPs PR #537 (benchmarks on an H200) measured torch.where
// over 16M fp16 elements at 3.53 TB/s, counting a 1-byte condition, two
// 2-byte inputs and a 2-byte output per element (7 B: 117.4 MB). memsh
// prices that stream 0.8 % faster. The same PR's broadcast patterns
// (PyTorch's add of [1000, 1000] + [1, 1000] at 0.62 TB/s, of [8, 1, 1024]
// + [1, 128, 1] at 0.34 TB/s, against 1.39 for same-shape operands) are
// 1M-element kernels of 4-6 µs, launch-bound: no rate for the graph
// models' broadcasts over millions of edges follows from them
// (docs/time.md, "What it does not know").
func TestEagerElementwiseAgainstH200(t *testing.T) {
	d, _ := hw.LookupDevice("H200")
	const n = 16 << 20
	bytes := float64(n * 7)
	measured := bytes / 3.53e12
	got, b := streamTime(&d, bytes)
	if e := got/measured - 1; math.Abs(e) > 0.06 || b != BoundMemory {
		t.Errorf("torch.where over 16M fp16 on an H200: memsh %.1f µs (%v), measured %.1f µs (%+.1f %%)", 1e6*got, b, 1e6*measured, 100*e)
	}
}
