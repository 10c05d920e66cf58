package replay

import (
	"math"

	"github.com/memsh/memsh/sim/core"
)

// Routed rows that change from micro-batch to micro-batch.
//
// A dropless MoE layer under expert parallelism receives as many rows as
// the ranks' routers send its experts, which real routing changes with
// every micro-batch and layer: the dispatch all-to-all's output, the
// rows the grouped GEMMs read and write, their gradients (core.ValueInfo.
// Routed marks them). The lowering sizes them once, at expert_load's
// share; parallel(expert_spread=s) replays each layer instance of each
// micro-batch copy, in each replayed step (the first and the steady one),
// at that share times a factor drawn uniformly from [1-s, 1+s] by a hash
// of the step and the layer's first routed value: deterministic, the
// same for a layer's forward, its recompute and its backward (the same
// tokens route the same way), different from one layer, micro-batch
// and step to the next. Every routed value of the layer instance takes
// the same factor, as they share its row count. Only the allocator sees
// it: the time model prices the lowered rows, the mean of the draws.

// routedBytes is n, the bytes of value v (or of its gradient), at the
// routed rows this replay draws for v's layer instance.
func (r *Replay) routedBytes(v core.Value, n int64) int64 {
	k := r.P.Values[v].Routed
	s := r.Plan.Parallel.ExpertSpread
	if k == 0 || s == 0 {
		return n
	}
	step := uint64(1)
	if r.lazy {
		step = 0
	}
	f := 1 + s*spreadDraw(uint64(int64(v)-int64(k-1)), step)
	return max(int64(math.Round(float64(n)*f)), 1)
}

// spreadDraw is a number in [-1, 1) from a layer instance's first routed
// value and the step: splitmix64 of both (Steele, Lea and Flood 2014,
// the finalizer of java.util.SplittableRandom).
func spreadDraw(anchor, step uint64) float64 {
	z := anchor*0x9e3779b97f4a7c15 + step*0xbf58476d1ce4e5b9 + 0x94d049bb133111eb
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/(1<<52) - 1
}
