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
		s.nb = min(max(2*s.nb, slabMin), slabMax)
		s.blocks, s.usedB = make([]Block, s.nb), 0
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
		s.nseg = min(max(2*s.nseg, slabMin), slabMax)
		s.segs, s.usedSeg = make([]segment, s.nseg), 0
	}
	p := &s.segs[s.usedSeg]
	*p = g
	s.usedSeg++
	return p
}
