package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestRowMeanHandCounted prices RMSNorm's pow(2).mean(-1, keepdim=True)
// on an H200 against bytes counted by hand: the forward reads the fp32
// [R, C] input and writes [R, 1] at the stream rate; mean_backward
// writes the input-sized gradient from the expanded [R, 1] one on the
// generic kernel (hw.GraphKernels.Broadcast: 0.569 of the peak for
// fp32). R x C = 16,384 x 1,024 (Qwen3-0.6B's norms at 8 x 2,048
// tokens). A mean over another dimension, a compiled plan and a GPU
// without the measurement keep stream's price.
func TestRowMeanHandCounted(t *testing.T) {
	const r, c = 16384, 1024
	X, x1 := float64(4*r*c), float64(4*r)
	in := tensor{[]int64{8, 2048, c}, units.FP32, true}
	stat := tensor{[]int64{r, 1}, units.FP32, true}
	bf16, _ := core.LookupPrecision("bf16")
	h200 := mustDevice(t, "H200")
	a100 := mustDevice(t, "A100-80GB")
	s := streamRate(&h200)
	g := 0.569 * h200.HBMGBps * 1e9
	mean := handOp{"mean", []int{0}, 1, nil, -1}
	for _, x := range []struct {
		name     string
		dev      hw.Device
		compile  bool
		ts       []tensor
		fwd, bwd float64 // seconds; -1: not this rule's
	}{
		{"row mean: X + x1 streamed; X + x1 generic backward", h200, false, []tensor{in, stat}, (X + x1) / s, (X + x1) / g},
		{"a mean to [R, C/2]: not a row statistic", h200, false, []tensor{in, {[]int64{r, c / 2}, units.FP32, true}}, -1, -1},
		{"compiled", h200, true, []tensor{in, stat}, -1, -1},
		{"A100: unmeasured", a100, false, []tensor{in, stat}, -1, -1},
	} {
		prog := handProgram(x.ts, []handOp{mean})
		plan := &core.Plan{Device: x.dev, Precision: bf16}
		if x.compile {
			plan.Compile = core.Compile{Blocks: true}
		}
		var ps Prices
		got, ok := newPricer(prog, plan, &ps).rowMean(&prog.Ops[0])
		if x.fwd < 0 {
			if ok {
				t.Errorf("%s: priced by the row-mean rule", x.name)
			}
			continue
		}
		if !ok || math.Abs(got.Fwd-x.fwd) > 1e-9 || math.Abs(got.Bwd-x.bwd) > 1e-9 || got.BwdK != 1 {
			t.Errorf("%s: forward %.2f µs, backward %.2f µs in %g kernels; want %.2f, %.2f in 1",
				x.name, 1e6*got.Fwd, 1e6*got.Bwd, got.BwdK, 1e6*x.fwd, 1e6*x.bwd)
		}
	}
}
