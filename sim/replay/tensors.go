package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// liveTensor is one tensor of the step: its block while allocated (nil
// once released) and its category.
type liveTensor struct {
	blk *alloc.Block
	cat core.Category
}

// tensors are the step's tensors by id, in chunks that never move: a
// step makes as many tensors as it makes allocations (852,000 in the
// FuzzSizes repeat_65536 seeds' FSDP step), and growing one slice to that
// copied it again and again (a third of the replay's heap bytes). A
// chunk holds size tensors: a step allocates about 1.8 tensors per value
// and parameter (Llama 70B's pipeline stages), so NewReplay sizes one
// chunk for two, and most steps need no second.
type tensors struct {
	chunks [][]liveTensor
	size   int32 // tensors per chunk
	n      int32
}

// add appends t and returns its id.
func (ts *tensors) add(t liveTensor) int32 {
	if ts.size == 0 { // a Replay not made by NewReplay
		ts.size = 64
	}
	k := ts.n % ts.size
	if k == 0 {
		ts.chunks = append(ts.chunks, make([]liveTensor, ts.size))
	}
	ts.chunks[len(ts.chunks)-1][k] = t
	ts.n++
	return ts.n - 1
}

// at is tensor id.
func (ts *tensors) at(id int32) *liveTensor { return &ts.chunks[id/ts.size][id%ts.size] }

// len is the number of tensors made.
func (ts *tensors) len() int32 { return ts.n }

// carry makes ts the first n tensors of prev (a copy: prev's chunks stay
// prev's).
func (ts *tensors) carry(prev *tensors, n int32) {
	*ts = tensors{size: ts.size}
	for id := range n {
		ts.add(*prev.at(id))
	}
}
