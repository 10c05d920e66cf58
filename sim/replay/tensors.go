package replay

import (
	"math/bits"

	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// liveTensor is one tensor of the step: its block while allocated (0
// once released) and its category. The block is named by its Ref, not
// a pointer: a chunk of tensors holds no pointer, so the garbage
// collector never scans it and the replay's writes of a tensor, at every
// allocation and release, pass no write barrier (sim/alloc/slab.go).
type liveTensor struct {
	blk alloc.Ref
	cat core.Category
}

// tensors are the step's tensors by id, in chunks that never move: a
// step makes as many tensors as it makes allocations (852,000 in the
// FuzzSizes repeat_65536 seeds' FSDP step), and growing one slice to that
// copied it again and again (a third of the replay's heap bytes). A
// chunk holds size tensors: a step allocates about 1.8 tensors per value
// and parameter (Llama 70B's pipeline stages), so NewReplay sizes one
// chunk for two, and most steps need no second. A chunk holds a power of
// two tensors, so that an id's chunk and place in it are a shift and a
// mask: a division by a size read at run time is one instruction but
// tens of cycles, at every allocation and release of the step.
type tensors struct {
	chunks [][]liveTensor
	last   []liveTensor // the latest chunk, where add writes
	shift  uint8        // a chunk holds 1<<shift tensors (0: not set yet, add sets 6)
	n      int32
}

// chunkShift is the shift of the least power of two chunk that holds n
// tensors (n >= 1).
func chunkShift(n int) uint8 { return uint8(bits.Len(uint(n - 1))) }

// add appends t and returns its id. It reads each field once (under the
// race detector every read is a checked call, at every allocation).
// A chunk past the tensors made (takeFirst) is written again, not made.
//
//go:norace
func (ts *tensors) add(t liveTensor) int32 {
	n, shift := ts.n, ts.shift
	if shift == 0 { // a Replay not made by NewReplay
		shift = 6
		ts.shift = shift
	}
	shift &= 31 // (below 32: the compiler checks no larger shift)
	mask := int32(1)<<shift - 1
	last := ts.last
	if n&mask == 0 {
		if c := int(n >> shift); c < len(ts.chunks) {
			last = ts.chunks[c]
		} else {
			last = make([]liveTensor, 1<<shift)
			ts.chunks = append(ts.chunks, last)
		}
		ts.last = last
	}
	last[n&mask] = t
	ts.n = n + 1
	return n
}

// at is tensor id.
//
//go:norace
func (ts *tensors) at(id int32) *liveTensor {
	shift := ts.shift & 31 // (below 32: the compiler checks no larger shift)
	return &ts.chunks[id>>shift][id&(int32(1)<<shift-1)]
}

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
	*ts = tensors{chunks: prev.chunks, shift: prev.shift, n: n}
	*prev = tensors{}
	if c := int(n >> ts.shift); c < len(ts.chunks) {
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
// hold at least an eighth of a chunk of ts's tensors each (the chunk size is the
// chunks', then: ids are counted, so any size holds the same tensors,
// and more chunks are made as needed; a pipeline's stages hold up to pp
// times the micro-batches of another, one worker replaying them in turn).
func (ts *tensors) reuse(chunks [][]liveTensor) {
	if len(chunks) > 0 && 8*len(chunks[0]) >= 1<<ts.shift { // chunks made by add: a power of two each
		ts.chunks, ts.shift = chunks, chunkShift(len(chunks[0]))
	}
}

// carry makes ts the first n tensors of prev (a copy: prev's chunks stay
// prev's).
func (ts *tensors) carry(prev *tensors, n int32) {
	*ts = tensors{shift: ts.shift}
	for id := range n {
		ts.add(*prev.at(id))
	}
}
