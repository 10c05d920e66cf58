package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestHFRopeHandCounted prices Hugging Face's rotary embedding of a bf16
// [4,096, 2,048] q on an H200 against its kernels counted by hand
// (rope.go): forward x * cos and rot * sin (2X each), -x2 (X) and the
// add (3X) on the generic kernel at 0.346 of the peak, the cat (2X) at
// the stream rate; backward grad * sin, grad * cos (2X each), -grad (X)
// and one sum (3X) generic, two slice_backward (2X each) and the other
// sum (3X) at the stream rate. Under autocast (an fp32 output) the
// products run at 0.300 of the peak, the add and the products'
// gradients at fp32's 0.569. A compiled plan
// and a GPU without the measurement keep the op's bytes at the stream
// rate.
func TestHFRopeHandCounted(t *testing.T) {
	const r, c = 4096, 2048
	x := float64(2 * r * c) // X: bf16 bytes
	rc := []int64{r, c}
	bf16, _ := core.LookupPrecision("bf16")
	h200 := mustDevice(t, "H200")
	a100 := mustDevice(t, "A100-80GB")
	peak, s := h200.HBMGBps*1e9, streamRate(&h200)
	for _, tc := range []struct {
		name     string
		dev      hw.Device
		compile  bool
		out      units.DType
		fwd, bwd float64
		fk, bk   float64
	}{
		{"bf16", h200, false, units.BF16,
			(4*x+x+3*x)/(0.346*peak) + 2*x/s, (4*x+x+3*x)/(0.346*peak) + 7*x/s, 5, 9},
		{"bf16 q, fp32 cos and sin (autocast)", h200, false, units.FP32,
			2*(3*x)/(0.300*peak) + x/(0.346*peak) + 6*x/(0.569*peak) + 2*x/s,
			2*(3*x)/(0.569*peak) + (x+3*x)/(0.346*peak) + 7*x/s, 5, 9},
		{"compiled: the op's bytes at the stream rate", h200, true, units.BF16, x / s, 2 * x / s, 1, 1},
		{"A100: not measured, the stream rate", a100, false, units.BF16, x / streamRate(&a100), 2 * x / streamRate(&a100), 1, 1},
	} {
		ob := 2.0
		if tc.out == units.FP32 {
			ob = 4
		}
		prog := handProgram([]tensor{{rc, units.BF16, true}, {rc, tc.out, true}},
			[]handOp{{"rope", []int{0}, 1, nil, ob / 2 * x}}) // the op's bytes as the builder sets them: its output's
		plan := &core.Plan{Device: tc.dev, Precision: bf16}
		if tc.compile {
			plan.Compile = core.Compile{Blocks: true}
		}
		var ps Prices
		got := ps.Of(prog, plan)[0]
		if math.Abs(got.Fwd-tc.fwd) > 1e-9 || math.Abs(got.Bwd-tc.bwd) > 1e-9 || got.FwdK != tc.fk || got.BwdK != tc.bk {
			t.Errorf("%s: forward %.2f µs in %g kernels, backward %.2f µs in %g; want %.2f in %g, %.2f in %g",
				tc.name, 1e6*got.Fwd, got.FwdK, 1e6*got.Bwd, got.BwdK, 1e6*tc.fwd, tc.fk, 1e6*tc.bwd, tc.bk)
		}
	}
}
