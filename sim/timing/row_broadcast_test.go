package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestRowBroadcastMulHandCounted prices eager RMSNorm's two multiplies
// (x * rsqrt(variance), weight * x) on an H200 against their bytes
// counted by hand at the rates of hw.GraphKernels.Broadcast (0.346 of
// the HBM peak for 2-byte operands, 0.569 for fp32) and the stream rate;
// a same-shape multiply, a compiled plan and a GPU without the
// measurement keep the stream rate. R x C = 4,096 x 1,024 (the hand
// program's parameter has 1,024 elements).
func TestRowBroadcastMulHandCounted(t *testing.T) {
	const r, c = 4096, 1024
	n := float64(r * c)
	rc := []int64{r, c}
	f32 := tensor{rc, units.FP32, true}
	stat := tensor{[]int64{r, 1}, units.FP32, true}
	bf := tensor{rc, units.BF16, true}
	bf16, _ := core.LookupPrecision("bf16")
	h200 := mustDevice(t, "H200")
	a100 := mustDevice(t, "A100-80GB")
	peak := h200.HBMGBps * 1e9
	s := streamRate(&h200)
	for _, x := range []struct {
		name     string
		dev      hw.Device
		compile  bool
		ts       []tensor
		op       handOp
		fwd, bwd float64 // seconds
		bwdK     float64
	}{
		{"fp32 x * rsqrt(variance): 8n + 4r bytes at 0.569 of the peak; x's gradient likewise, the statistic's a multiply and a row sum",
			h200, false, []tensor{f32, stat, f32}, handOp{"mul", []int{0, 1}, 2, nil, 0},
			(8*n + 4*r) / (0.569 * peak), (8*n+4*r)/(0.569*peak) + (16*n+4*r)/s, 3},
		{"bf16 weight * x: 4n + 2c bytes at 0.346 of the peak; x's gradient likewise, the weight's a multiply and a column sum",
			h200, false, []tensor{bf, bf}, handOp{"mul", []int{0}, 1, []int32{0}, 0},
			(4*n + 2*c) / (0.346 * peak), (4*n+2*c)/(0.346*peak) + (8*n+2*c)/s, 3},
		{"same-shape multiply: the stream rate", h200, false, []tensor{bf, bf, bf}, handOp{"mul", []int{0, 1}, 2, nil, 0},
			6 * n / s, 12 * n / s, 1},
		{"compiled: Inductor's kernel at the stream rate", h200, true, []tensor{f32, stat, f32}, handOp{"mul", []int{0, 1}, 2, nil, 0},
			-1, -1, -1},
		{"A100: not measured, the stream rate", a100, false, []tensor{f32, stat, f32}, handOp{"mul", []int{0, 1}, 2, nil, 0},
			(8*n + 4*r) / streamRate(&a100), 2 * (8*n + 4*r) / streamRate(&a100), 1},
	} {
		prog := handProgram(x.ts, []handOp{x.op})
		plan := &core.Plan{Device: x.dev, Precision: bf16}
		if x.compile {
			plan.Compile = core.Compile{Blocks: true}
		}
		checkRulePrice(t, x.name, prog, plan, (*pricer).rowBroadcastMul, x.fwd, x.bwd, x.bwdK)
	}
}

// TestGroupedMMMaskedFill prices transformers 5's grouped_mm sentinel
// masked_fill (an [S, n] bf16 output by an [S, 1] bool mask) on an H200
// at the causal mask's measured fraction of the stream rate
// (hw.EagerKernels.MaskedFill, 0.311): the same generic kernel, a
// broadcast operand; its backward, grad.masked_fill(mask, 0), the same
// kernels over the same bytes (bwd_kernels.jsonl: 2.05 ms against the
// forward's 1.91), at the forward's price. A mask of the output's shape
// keeps the stream rate, and the general backward (twice the bytes).
func TestGroupedMMMaskedFill(t *testing.T) {
	const r, c = 65536, 1024
	h200 := mustDevice(t, "H200")
	bf16, _ := core.LookupPrecision("bf16")
	s := streamRate(&h200)
	y := tensor{[]int64{r, c}, units.BF16, true}
	for _, x := range []struct {
		name string
		mask []int64
		frac float64
		bwd  float64 // backward bytes over the forward's, at frac of the rate
	}{
		{"[S, 1] mask", []int64{r, 1}, 0.311, 1},
		{"a mask of the output's shape", []int64{r, c}, 1, 2},
	} {
		prog := handProgram([]tensor{y, {x.mask, units.BOOL, false}, y}, []handOp{{"masked_fill", []int{0, 1}, 2, nil, 0}})
		var ps Prices
		got := ps.Of(prog, &core.Plan{Device: h200, Precision: bf16})[0]
		want := prog.Ops[0].Bytes / (x.frac * s)
		if math.Abs(got.Fwd-want) > 1e-9 {
			t.Errorf("%s: forward %.2f µs, want %.2f", x.name, 1e6*got.Fwd, 1e6*want)
		}
		if wb := x.bwd * want; math.Abs(got.Bwd-wb) > 1e-9 {
			t.Errorf("%s: backward %.2f µs, want %.2f", x.name, 1e6*got.Bwd, 1e6*wb)
		}
	}
}

// checkRulePrice prices the single op of prog and compares it with the
// hand-counted forward and backward seconds and backward kernels; a
// negative fwd means the rule must leave the op to another (rule reports
// it did not price it).
func checkRulePrice(t *testing.T, name string, prog *core.Program, plan *core.Plan, rule func(*pricer, *core.OpInfo) (OpCost, bool), fwd, bwd, bwdK float64) {
	t.Helper()
	var ps Prices
	got := ps.Of(prog, plan)[0]
	if fwd < 0 {
		if _, ok := rule(newPricer(prog, plan, &ps), &prog.Ops[0]); ok {
			t.Errorf("%s: priced by the rule under test", name)
		}
		return
	}
	if math.Abs(got.Fwd-fwd) > 1e-9 || math.Abs(got.Bwd-bwd) > 1e-9 || got.BwdK != bwdK {
		t.Errorf("%s: forward %.2f µs, backward %.2f µs in %g kernels; want %.2f, %.2f in %g",
			name, 1e6*got.Fwd, 1e6*got.Bwd, got.BwdK, 1e6*fwd, 1e6*bwd, bwdK)
	}
}
