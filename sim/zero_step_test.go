package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// TestZeroStepCopies: DeepSpeed's copies before a ZeRO step
// (sim/replay/zero_step.go, DeepSpeed 0.19.8; their sizes measured on the
// CPU by tools/oracle/zero_reduce.py, TestZeroReduceAsDeepSpeed's
// command), hand-counted on the 7.5B stack of TestZeRO2GradientPartitions
// (60 linears of 125,000,000 elements), 8 ranks, bf16 with an fp32 master:
//
//   - ZeRO-3: the partitions, 60 x 15,625,000 = 937,500,000 elements, are
//     one sub-group (under sub_group_size 1e9). The norm copies each
//     partition to fp64 and reads it back: 937,500,000 x (2 + 8 + 8) =
//     16,875,000,000 B, 2 kernels a partition and 3 for the total (123);
//     the flatten reads and writes it in bf16, 3,750,000,000 B, one cat
//     (60 inputs, 64 a kernel); the cast to fp32 reads bf16 and writes
//     fp32, 5,625,000,000 B, one kernel. The norm's largest copy,
//     15,625,000 elements in fp64, is 125,000,000 B.
//   - ZeRO-2: the followed rank's partition of the flat group, the same
//     937,500,000 elements, holds 8 parameters, priced as its share of
//     the 60 and the one it starts inside, 9 (timing/zero_step.go: the
//     group's totals, which the search's estimate has too): 2 x 9 + 3
//     norm kernels, one cat, one cast, the same bytes; its largest slice
//     is a whole parameter, 125,000,000 elements: 1,000,000,000 B in fp64.
//
// The step's time grows by their bytes at the copy bandwidth.
func TestZeroStepCopies(t *testing.T) {
	for _, c := range []struct {
		zero    int
		want    timing.ZeroStepWork
		normMax int64
	}{
		// Scale: unscale_and_clip_grads' in-place mul over the fp32 partition
		// (937.5 M elements read and written, 4 B each), one kernel a set
		{3, timing.ZeroStepWork{Norm: 16_875_000_000, Flat: 3_750_000_000, Cast: 5_625_000_000, Scale: 7_500_000_000, Kernels: 123 + 1 + 1 + 1}, 125_000_000},
		{2, timing.ZeroStepWork{Norm: 16_875_000_000, Flat: 3_750_000_000, Cast: 5_625_000_000, Scale: 7_500_000_000, Kernels: 21 + 1 + 1 + 1}, 1_000_000_000},
	} {
		p := distPlan(t, linearStack(30, 5000, 25000), "bf16-mixed", core.Parallelism{DP: 8, Zero: c.zero})
		if q, ok := p.DeepspeedPrecision(); ok { // DeepSpeed's bf16 mode, as Evaluate runs it
			p = q
		}
		r, err := replay.Run(lower(t, p), p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		ow := timing.OptimizerWorkOf(r)
		if got := timing.ZeroStepWorkOf(p, ow.Zero); got != c.want {
			t.Errorf("zero %d: %+v, hand count %+v", c.zero, got, c.want)
		}
		allocs, _, _ := zeroTensorEvents(r.Rep, "gradient in fp64 for the norm")
		if len(allocs) != 1 || allocs[0] != fmt.Sprintf("optimizer:%d", c.normMax) {
			t.Errorf("zero %d: the norm's copies %v, want one of %d B", c.zero, allocs, c.normMax)
		}
		with, cpu := timing.OptimizerTime(p, ow)
		// gradient_clipping adds the clip coefficient's scalar kernels to
		// the scale, not torch's clip_grad_norm_ passes (gradients.go)
		clipped := *p
		clipped.Overheads.ClipGradNorm = 1
		cw := timing.ZeroStepWorkOf(&clipped, ow.Zero)
		if cw.Kernels != c.want.Kernels+4 || cw.Scale != c.want.Scale {
			t.Errorf("zero %d clipped: %+v, want the same with 4 scalar kernels more", c.zero, cw)
		}
		if g, gc := timing.OptimizerTime(&clipped, ow); g != with || gc <= cpu {
			t.Errorf("zero %d clipped: %.6g s on the GPU (%.6g without the clip), %.6g s on the CPU (%.6g): want the GPU's the same, the CPU's more",
				c.zero, g, with, gc, cpu)
		}
		ow.Zero = [2]timing.ZeroGroup{}
		without, _ := timing.OptimizerTime(p, ow)
		bytes := c.want.Norm + c.want.Flat + c.want.Cast + c.want.Scale
		rate := p.Device.HBMGBps * 1e9 * p.Device.RatesRef().HBM // timing's copy bandwidth (kernels.go streamRate)
		if d := with - without; math.Abs(d-bytes/rate) > 1e-9 {
			t.Errorf("zero %d: the copies add %.6g s to the step, want their %.4g B at %.4g B/s, %.6g s", c.zero, d, bytes, rate, bytes/rate)
		}
	}
}
