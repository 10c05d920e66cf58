package hw

import (
	"math"
	"testing"
)

// The attention curves reproduce the published points they were fitted
// to (kernels.go: FlashAttention-3 paper, head dim 128, H100 SXM5, bf16)
// within 3.1 %.
func TestAttentionCurvesMatchPublished(t *testing.T) {
	seqs := []float64{512, 1024, 2048, 4096, 8192, 16384}
	const peak = 989.0
	for _, tc := range []struct {
		name             string
		k                AttnKernel
		backward, causal bool
		tflops           []float64
	}{
		{"FA2 forward", fa2Hopper, false, false, []float64{309, 350, 362, 368, 370, 370}},
		{"FA3 forward", fa3Hopper, false, false, []float64{467, 565, 625, 638, 646, 648}},
		{"FA2 forward causal", fa2Hopper, false, true, []float64{191, 260, 298, 319, 333, 335}},
		{"FA3 forward causal", fa3Hopper, false, true, []float64{292, 423, 521, 579, 602, 616}},
		{"FA2 backward", fa2Hopper, true, false, []float64{214, 260, 291, 310, 318, 322}},
		{"FA3 backward", fa3Hopper, true, false, []float64{316, 424, 501, 542, 559, 561}},
	} {
		for i, s := range seqs {
			got := tc.k.Pass(tc.backward, tc.causal).At(s) * peak
			if e := math.Abs(got/tc.tflops[i] - 1); e > 0.031 {
				t.Errorf("%s at %g: %.0f TFLOP/s, published %.0f (%.1f %% off)", tc.name, s, got, tc.tflops[i], 100*e)
			}
		}
	}
}

// Every catalog GPU has kernel rates with a source, and its fractions of
// peak lie in (0, 1].
func TestCatalogKernelRates(t *testing.T) {
	for _, d := range Catalog() {
		r := d.Kernels
		if r.SMs <= 0 || r.Source == "" {
			t.Errorf("%s: kernel rates without SMs or source: %+v", d.Name, r)
		}
		for name, f := range map[string]float64{"GEMM": r.GEMM, "HBM": r.HBM, "PCIe": r.PCIe, "flash fwd": r.Flash.Fwd.Max, "fused bwd": r.Fused.BwdCausal.Max} {
			if !(f > 0 && f <= 1) {
				t.Errorf("%s: %s fraction %g outside (0, 1]", d.Name, name, f)
			}
		}
		if d.FP8TFLOPS > 0 && !(r.GEMMFP8 > 0) {
			t.Errorf("%s: fp8 peak without an fp8 GEMM rate", d.Name)
		}
	}
	if (Device{Name: "custom"}).Rates().GEMM != DefaultKernelRates.GEMM {
		t.Error("a custom device must take the default kernel rates")
	}
}

// Sustain's first named cause is the clock a GPU holds at its power limit
// through a long run of GEMMs; the published Ampere figures put that part
// at 0.93-0.95, so the fitted Sustain (which lumps the unpriced rest on
// top) cannot exceed them: a refit above says memsh's kernel rates are too
// slow, not that the power limit costs less.
func TestSustainBelowPowerLimitedClock(t *testing.T) {
	for _, c := range []struct {
		source  string
		part    float64
		sustain float64
	}{
		{"NVIDIA's A100 HPL clock at the power limit, 1,305 of 1,410 MHz (G. Lockwood, Peak FLOPS)", 1305.0 / 1410, ampereSustain},
		{"H. He, A100 bf16 8192^3 on random data 257 TFLOP/s against MAMF 271.2 (thonking.ai, 2024)", 257 / 271.2, ampereSustain},
	} {
		if c.sustain > c.part {
			t.Errorf("Sustain %.2f is above %.3f, the %s", c.sustain, c.part, c.source)
		}
	}
}

// The SM count is the chip's as sold: cards cut from the same die differ
// (CUDA cores / 128 a SM, from the GA102 and Ada whitepapers), and the
// attention kernels' wave quantization follows it.
func TestCatalogSMCounts(t *testing.T) {
	for name, want := range map[string]int{
		"A100-80GB": 108, "H100-80GB": 132, "L40S": 142, "RTX-4090": 128, "A6000": 84, "RTX-3090": 82,
	} {
		d, err := LookupDevice(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kernels.SMs != want {
			t.Errorf("%s: %d SMs, want %d", name, d.Kernels.SMs, want)
		}
	}
}
