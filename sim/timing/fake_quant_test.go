package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// A bf16 activation fake quantizer's steps over n = 4,096 x 4,096
// elements, priced on an H100 against autograd's rules counted by hand
// (fake_quant.go): the product by 1/scale (bf16 x, fp32 out: grad x
// 1/scale in fp32, 8n, then the cast to bf16, 6n: two kernels), the
// rounding (the gradient passed straight through: none), the clamp
// (two comparisons of the fp32 input, 5n each, logical_and_ 3n, where
// 9n: 22n in four kernels), the sub of the zero point (passed through:
// none). Each forward streams its bytes as any elementwise op.
func TestFakeQuantBackwardHandCounted(t *testing.T) {
	const r, c = 4096, 4096
	n := float64(r * c)
	rc := []int64{r, c}
	bf16, _ := core.LookupPrecision("bf16")
	h100 := mustDevice(t, "H100-80GB")
	s := streamRate(&h100)
	prog := handProgram([]tensor{
		{rc, units.BF16, true},          // 0: x
		{[]int64{r}, units.FP32, false}, // 1: 1/scale
		{rc, units.FP32, true},          // 2: x * (1/scale)
		{rc, units.FP32, true},          // 3: rounded
		{rc, units.FP32, true},          // 4: clamped
		{rc, units.BF16, true},          // 5: q's copy
		{[]int64{r}, units.BF16, false}, // 6: zero_point in bf16
		{rc, units.BF16, true},          // 7: centred
	}, []handOp{
		{"mul", []int{0, 1}, 2, nil, 0},
		{"round", []int{2}, 3, nil, 0},
		{"clamp", []int{3}, 4, nil, 0},
		{"sub", []int{5, 6}, 7, nil, 0},
	})
	for i := range prog.Ops {
		prog.Ops[i].FakeQuant = true
	}
	plan := &core.Plan{Device: h100, Precision: bf16}
	var ps Prices
	got := ps.Of(prog, plan)
	for i, want := range []struct {
		bytes, kernels float64
	}{{8*n + 6*n, 2}, {0, 0}, {22 * n, 4}, {0, 0}} {
		if got[i].BwdK != want.kernels || math.Abs(got[i].Bwd-max(want.bytes/s, want.kernels*kernelFloor)) > 1e-12 {
			t.Errorf("%s: backward %.2f µs in %g kernels, want %.2f µs in %g", prog.Ops[i].Kind, got[i].Bwd*1e6, got[i].BwdK, want.bytes/s*1e6, want.kernels)
		}
	}
}
