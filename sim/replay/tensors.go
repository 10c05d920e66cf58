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
	last   []liveTensor // the latest chunk, where add writes
	size   int32        // tensors per chunk
	n      int32
}

// add appends t and returns its id. It reads each field once (under the
// race detector every read is a checked call, at every allocation).
// A chunk past the tensors made (takeFirst) is written again, not made.
//
//go:norace
func (ts *tensors) add(t liveTensor) int32 {
	n, size := ts.n, ts.size
	if size == 0 { // a Replay not made by NewReplay
		size = 64
		ts.size = size
	}
	last := ts.last
	if k := n % size; k == 0 {
		if c := int(n / size); c < len(ts.chunks) {
			last = ts.chunks[c]
		} else {
			last = make([]liveTensor, size)
			ts.chunks = append(ts.chunks, last)
		}
		ts.last = last
	}
	last[n%size] = t
	ts.n = n + 1
	return n
}

// at is tensor id.
//
//go:norace
func (ts *tensors) at(id int32) *liveTensor { return &ts.chunks[id/ts.size][id%ts.size] }

// len is the number of tensors made.
//
//go:norace
func (ts *tensors) len() int32 { return ts.n }

// takeFirst makes ts the first n tensors of prev, taking prev's chunks
// (prev is not used again): the tensors past n are written over as ts
// adds its own. A tensor prev made after n may still be added (read
// before its place is written over: add writes at ts.len(), which is at
// most the id of every tensor of prev not added yet when those are added
// in increasing order, as warmFirstStep adds the first step's moments).
func (ts *tensors) takeFirst(prev *tensors, n int32) {
	*ts = tensors{chunks: prev.chunks, size: prev.size, n: n}
	*prev = tensors{}
	if c := int(n / ts.size); c < len(ts.chunks) {
		ts.last = ts.chunks[c]
	}
}

// empty clears the tensors made and returns the chunks, for another
// replay's tensors (reuse: their blocks were a finished allocator's).
func (ts *tensors) empty() [][]liveTensor {
	chunks := ts.chunks
	for _, c := range chunks { // all of each: a first step's tensors may lie past the steady step's (takeFirst)
		clear(c)
	}
	*ts = tensors{}
	return chunks
}

// reuse starts ts, empty, on chunks another replay emptied when they
// hold at least an eighth of ts.size tensors each (the chunk size is the
// chunks', then: ids are counted, so any size holds the same tensors,
// and more chunks are made as needed; a pipeline's stages hold up to pp
// times the micro-batches of another, one worker replaying them in turn).
func (ts *tensors) reuse(chunks [][]liveTensor) {
	if len(chunks) > 0 && 8*len(chunks[0]) >= int(ts.size) {
		ts.chunks, ts.size = chunks, int32(len(chunks[0]))
	}
}

// carry makes ts the first n tensors of prev (a copy: prev's chunks stay
// prev's).
func (ts *tensors) carry(prev *tensors, n int32) {
	*ts = tensors{size: ts.size}
	for id := range n {
		ts.add(*prev.at(id))
	}
}
