package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// On runtimes up to torch 2.7 an eager fp16 or bf16 index_select copies
// its rows an element at a time, 2.5x slower than the vectorised copy of
// torch 2.8 and later (pytorch#152380 on an A100 80GB). Counted by hand:
// 262,144 rows of 1 KiB gathered on an H100 (its measured graph kernels
// set aside: graph_rates_test.go holds those) from a 64 MiB table move
// 262,144 x 8 + 156 MiB + 256 MiB = 434,110,464 B (TestGraphOpsFromAccessPattern)
// in every dtype here (512 fp16 or bf16 channels, 256 fp32), so the
// forward takes 434,110,464 B / the copy bandwidth on "cuda" and 2.5
// times that on "cuda-2.6" and older, for 2-byte rows only, eagerly only;
// the backward (an index_add_, another kernel) is the same everywhere.
func TestScalarIndexSelectBeforeTorch28(t *testing.T) {
	const e, r, bytes = 262_144, 65_536, 434_110_464
	d, err := hw.LookupDevice("H100")
	if err != nil {
		t.Fatal(err)
	}
	d.Kernels.Graph = hw.GraphKernels{} // the copy rate: no measured graph kernels
	for _, tc := range []struct {
		runtime  string
		dt       units.DType
		dispatch Dispatch
		ratio    float64 // forward time over the copy-bandwidth time
	}{
		{"cuda", units.FP16, DispatchEager, 1},
		{"cuda-2.6", units.FP16, DispatchEager, 2.5},
		{"cuda-2.6", units.BF16, DispatchEager, 2.5},
		{"cuda-2.1", units.FP16, DispatchEager, 2.5},
		{"cuda-1.10", units.BF16, DispatchEager, 2.5},
		{"cuda-2.6", units.FP32, DispatchEager, 1},
		{"cuda-2.6", units.FP16, DispatchCompiled, 1},
	} {
		rt, err := core.LookupRuntime(tc.runtime)
		if err != nil {
			t.Fatal(err)
		}
		c := int64(1024 * 8 / tc.dt.Bits())
		pr := &pricer{d: d, dispatch: tc.dispatch, scalarIndexSelect: rt.ScalarIndexSelect}
		pr.prog = &core.Program{Values: []core.ValueInfo{
			{Shape: []int64{e, c}, Bytes: e * 1024, Dtype: tc.dt, Grad: true},
			{Shape: []int64{e}, Bytes: e * 8},
			{Shape: []int64{r, c}, Bytes: r * 1024, Dtype: tc.dt, Grad: true},
		}}
		g := pr.gather(&core.OpInfo{Kind: "index_select", In: []core.Value{2, 1}, Out: []core.Value{0}})
		want := tc.ratio * bytes / streamRate(&d)
		if g.Bytes != bytes || math.Abs(g.Fwd/want-1) > 1e-12 {
			t.Errorf("%s %s %s: forward %.0f B in %.4g ms, want %d B in %.4g ms", tc.runtime, tc.dt, tc.dispatch, g.Bytes, 1e3*g.Fwd, bytes, 1e3*want)
		}
		base := &pricer{d: d, dispatch: tc.dispatch, prog: pr.prog}
		if b := base.gather(&core.OpInfo{Kind: "index_select", In: []core.Value{2, 1}, Out: []core.Value{0}}); g.Bwd != b.Bwd || g.Bwd == 0 {
			t.Errorf("%s %s: backward %.4g ms, want the vectorised runtime's %.4g ms", tc.runtime, tc.dt, 1e3*g.Bwd, 1e3*b.Bwd)
		}
	}
}
