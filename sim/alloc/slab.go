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

// nextBlocks is the next slab of blocks: a spare one, or a new one
// twice the size of the last.
func (s *slabs) nextBlocks() []Block {
	var b []Block
	if n := len(s.spare.blocks); n > 0 {
		b = s.spare.blocks[n-1]
		s.spare.blocks[n-1] = nil
		s.spare.blocks = s.spare.blocks[:n-1]
	} else {
		s.nb = min(max(2*s.nb, slabMin), slabMax)
		b = make([]Block, s.nb)
	}
	s.held.blocks = append(s.held.blocks, b)
	return b
}

// nextSegs is nextBlocks for segments.
func (s *slabs) nextSegs() []segment {
	var g []segment
	if n := len(s.spare.segs); n > 0 {
		g = s.spare.segs[n-1]
		s.spare.segs[n-1] = nil
		s.spare.segs = s.spare.segs[:n-1]
	} else {
		s.nseg = min(max(2*s.nseg, slabMin), slabMax)
		g = make([]segment, s.nseg)
	}
	s.held.segs = append(s.held.segs, g)
	return g
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
		s.blocks, s.usedB = s.nextBlocks(), 0
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
		s.segs, s.usedSeg = s.nextSegs(), 0
	}
	p := &s.segs[s.usedSeg]
	*p = g
	s.usedSeg++
	return p
}
