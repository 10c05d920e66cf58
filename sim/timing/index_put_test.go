package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestIndexPutBackwardHandCounted prices the backward of advanced
// indexing (x[index], kind "index": IndexBackward0, index_put_ with
// accumulate, sort-based on CUDA) on an H200 against its parts counted
// by hand: the zeroed source at the stream rate, then the gradient's
// elements at hw.GraphKernels.IndexPut (414.7 G a second, 2-byte
// elements). The grouped_mm experts' gather of the routed copies
// (hidden_states[perm // top_k]: 65,536 rows of 1,024 from 8,192) and
// the restored order (weighted_out[inv_perm]: 65,536 from 65,536). An
// fp32 gradient (unmeasured), index_select (index_add_'s rule) and a GPU
// without the measurement keep their old prices: the test asks only that
// they differ from this rule's.
func TestIndexPutBackwardHandCounted(t *testing.T) {
	const S, T, d = 65536, 8192, 1024
	h200 := mustDevice(t, "H200")
	a100 := mustDevice(t, "A100-80GB")
	bf16, _ := core.LookupPrecision("bf16")
	s := streamRate(&h200)
	n := float64(S * d)
	for _, x := range []struct {
		name string
		dev  hw.Device
		kind string
		dt   units.DType
		src  int64 // source rows
		want float64
	}{
		{"x[perm // k]: 8,192 source rows", h200, "index", units.BF16, T, 2*T*d/s + n/414.7e9},
		{"y[inv_perm]: 65,536 source rows", h200, "index", units.BF16, S, 2*S*d/s + n/414.7e9},
		{"fp32: unmeasured", h200, "index", units.FP32, S, -1},
		{"index_select: index_add_", h200, "index_select", units.BF16, S, -1},
		{"A100: unmeasured", a100, "index", units.BF16, S, -1},
	} {
		src := tensor{[]int64{x.src, d}, x.dt, true}
		idx := tensor{[]int64{S}, units.INT64, false}
		out := tensor{[]int64{S, d}, x.dt, true}
		prog := handProgram([]tensor{src, idx, out}, []handOp{{x.kind, []int{0, 1}, 2, nil, 0}})
		var ps Prices
		got := ps.Of(prog, &core.Plan{Device: x.dev, Precision: bf16})[0]
		rule := 2*float64(x.src*d)/s + n/414.7e9
		if x.dt == units.FP32 {
			rule = 4*float64(x.src*d)/s + n/414.7e9
		}
		if x.want < 0 {
			if math.Abs(got.Bwd-rule) < 1e-9 {
				t.Errorf("%s: backward %.2f µs, priced by the index_put_ rule", x.name, 1e6*got.Bwd)
			}
			continue
		}
		if math.Abs(got.Bwd-x.want) > 1e-9 || got.BwdK != 2 {
			t.Errorf("%s: backward %.2f µs in %g kernels, want %.2f in 2", x.name, 1e6*got.Bwd, got.BwdK, 1e6*x.want)
		}
	}
}
