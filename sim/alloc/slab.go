package alloc

// Blocks and segments are carved from slabs the allocator owns: a step
// of 65,536 layers splits a block at nearly every request, and a heap
// allocation per block was a fifth of its replay's allocations (the
// FuzzSizes repeat_65536 seeds, BenchmarkFuzzCorpus).
//
// A block merged into its neighbour (or the block of a released segment)
// is done with, and the next block is made in its place: the replay of a
// 65,536-layer step merges and splits about a million times, and writing
// each new block into fresh memory was an eighth of the allocator's time
// under the race detector. Nothing reads a dead block but the caller of
// Release, at once (its stream and whether it is pending, for a trace),
// so a dead block keeps its fields until it is made again; only its next
// links the dead.

// slabMax is the most blocks or segments one slab holds; slabs double
// from slabMin, so that a short replay does not pay for a long one's.
const slabMin, slabMax = 16, 1024

// slabs are the allocator's unused blocks and segments.
type slabs struct {
	// The current slabs, used up to usedB and usedSeg (counts, not
	// shorter slices: a slice header stored at every new block was a
	// pointer write, which the garbage collector's write barrier records
	// while it marks).
	blocks         []Block
	segs           []segment
	usedB, usedSeg int
	nb, nseg       int    // the size of the latest slab of each
	dead           *Block // blocks done with, linked by next
	// held are every slab the allocator carved from (the current ones
	// too), and spare those a finished allocator left it (Reuse), taken
	// before a new slab is made: Slabs hands both on.
	held, spare Slabs
}

// Slabs are the blocks and segments of allocators done with, for another
// to carve its own from (Allocator.Reuse): the replays of a search make
// and drop hundreds of allocators of similar sizes. Every block and
// segment carved from a slab is written whole first (newBlock, newSeg),
// so nothing a finished allocator left in them is read.
type Slabs struct {
	blocks [][]Block
	segs   [][]segment
}

// Slabs hands over a's slabs, those it carved from and those it was
// given and did not use; a must not be used after.
func (a *Allocator) Slabs() Slabs {
	s := Slabs{append(a.held.blocks, a.spare.blocks...), append(a.held.segs, a.spare.segs...)}
	a.slabs = slabs{}
	return s
}

// Reuse gives a, before its first request, slabs to carve its blocks
// and segments from before it makes new ones.
func (a *Allocator) Reuse(s Slabs) { a.spare = s }

// nextSlab is the next slab of blocks or segments: a spare one, or a new
// one twice the size of the last (*size), held from then on.
func nextSlab[T any](spare, held *[][]T, size *int) []T {
	var x []T
	if n := len(*spare); n > 0 {
		x = (*spare)[n-1]
		(*spare)[n-1] = nil
		*spare = (*spare)[:n-1]
	} else {
		*size = min(max(2*(*size), slabMin), slabMax)
		x = make([]T, *size)
	}
	*held = append(*held, x)
	return x
}

// newBlock returns a block holding b: a dead one, or one from the
// current slab.
//
//go:norace
func (s *slabs) newBlock(b Block) *Block {
	if p := s.dead; p != nil {
		s.dead = p.next
		*p = b
		return p
	}
	if s.usedB == len(s.blocks) {
		s.blocks, s.usedB = nextSlab(&s.spare.blocks, &s.held.blocks, &s.nb), 0
	}
	p := &s.blocks[s.usedB]
	*p = b
	s.usedB++
	return p
}

// dropBlock marks b as done with: merged into a neighbour, or the
// block of a released segment.
//
//go:norace
func (s *slabs) dropBlock(b *Block) {
	b.next, s.dead = s.dead, b
}

// newSeg returns a segment holding g, from the current slab.
//
//go:norace
func (s *slabs) newSeg(g segment) *segment {
	if s.usedSeg == len(s.segs) {
		s.segs, s.usedSeg = nextSlab(&s.spare.segs, &s.held.segs, &s.nseg), 0
	}
	p := &s.segs[s.usedSeg]
	*p = g
	s.usedSeg++
	return p
}
