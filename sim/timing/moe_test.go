package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// Megatron's sort_chunks_by_idxs copies the received rows once each way:
// 32,768 rows of 2,048 bf16 (134,217,728 bytes) read and written is
// 268,435,456 bytes, on an H100 (3,350 GB/s) at the copy bandwidth's
// fraction streamRate gives; the backward copies the gradient back, the
// same bytes: one kernel each way, never fused with its neighbours.
func TestChunkCopy(t *testing.T) {
	h100, err := hw.LookupDevice("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	const rows, dim = 32768, 2048
	s := int64(rows * dim * 2)
	prog := &core.Program{Loss: core.NoValue, Input: core.NoValue, Labels: core.NoValue}
	prog.Values = []core.ValueInfo{
		{Name: "received", Shape: []int64{rows, dim}, Dtype: units.BF16, Bytes: s, Grad: true, Producer: -1},
		{Name: "sorted", Shape: []int64{rows, dim}, Dtype: units.BF16, Bytes: s, Grad: true, Producer: 0},
	}
	prog.Ops = []core.OpInfo{{Name: "moe.sort_chunks", Kind: "chunk_copy", In: []core.Value{0}, Out: []core.Value{1}, Bytes: float64(2 * s)}}
	if pointwise(&prog.Ops[0]) {
		t.Fatal("chunk_copy fuses with its neighbours; it is a kernel of its own")
	}
	c := PriceOps(prog, &core.Plan{Device: h100, Overheads: core.Overheads{Dispatch: "fused"}})[0]
	want := 268435456 / streamRate(&h100)
	if math.Abs(c.Fwd/want-1) > 1e-9 || math.Abs(c.Bwd/want-1) > 1e-9 || c.FwdK != 1 || c.BwdK != 1 {
		t.Errorf("forward %.1f µs (%g kernels), backward %.1f µs (%g), want %.1f µs each, one kernel", 1e6*c.Fwd, c.FwdK, 1e6*c.Bwd, c.BwdK, 1e6*want)
	}
}
