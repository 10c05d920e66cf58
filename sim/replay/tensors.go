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

// tensors are the step's tensors by id, in chunks of tensorChunk that
// never move: a step makes as many tensors as it makes allocations
// (852,000 in the FuzzSizes repeat_65536 seeds' FSDP step), and growing
// one slice to that copied it again and again (a third of the replay's
// heap bytes).
type tensors struct {
	chunks [][]liveTensor
	n      int32
}

const tensorChunk = 1 << 12

// add appends t and returns its id.
func (ts *tensors) add(t liveTensor) int32 {
	k := int(ts.n % tensorChunk)
	if k == 0 {
		ts.chunks = append(ts.chunks, make([]liveTensor, tensorChunk))
	}
	ts.chunks[len(ts.chunks)-1][k] = t
	ts.n++
	return ts.n - 1
}

// at is tensor id.
func (ts *tensors) at(id int32) *liveTensor { return &ts.chunks[id/tensorChunk][id%tensorChunk] }

// len is the number of tensors made.
func (ts *tensors) len() int32 { return ts.n }

// carry makes ts the first n tensors of prev (a copy: prev's chunks stay
// prev's).
func (ts *tensors) carry(prev *tensors, n int32) {
	*ts = tensors{}
	for id := range n {
		ts.add(*prev.at(id))
	}
}
