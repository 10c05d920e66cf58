package nn

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
)

// markRouted marks the values of one MoE layer whose leading dimension is
// the routed rows this rank's experts receive (core.ValueInfo.Routed):
// the activations from the dispatch all-to-all's output first through
// the combine all-to-all's input, whose rows are the received rows (or
// those gathered over expert tp, or padded per expert for fp8), less
// skip (this rank's own tensors of its sent rows made among them, the
// permuted probs). The combine's output, this rank's own routed copies,
// is not among them: dropless routing sends tokens x top_k rows whatever
// the routing. Only under expert parallelism with dropless routing does
// the count change with the routing (one rank's experts all run on the
// rows it holds otherwise, and a capacity factor fixes every count).
func (m *MoE) markRouted(b *core.Builder, first, end core.Value, recv int64, skip ...core.Value) {
	if b.Par.Epn() == 1 || m.Capacity > 0 {
		return
	}
	for v := first; v < end; v++ {
		vi := b.Val(v)
		if vi.Cat != core.CatActivations || len(vi.Shape) == 0 || vi.Shape[0] < recv || slices.Contains(skip, v) {
			continue
		}
		vi.Routed = int32(v-first) + 1
	}
}
