package alloc

// Blocks and segments are carved from slabs the allocator owns: a step
// of 65,536 layers splits a block at nearly every request, and a heap
// allocation per block was a fifth of its replay's allocations (the
// FuzzSizes repeat_65536 seeds, BenchmarkFuzzCorpus). A slab is never
// reused: a block lives as long as anything points to it, and its slab
// with it.

// slabMax is the most blocks or segments one slab holds; slabs double
// from slabMin, so that a short replay does not pay for a long one's.
const slabMin, slabMax = 16, 1024

// slabs are the allocator's unused blocks and segments.
type slabs struct {
	blocks   []Block
	segs     []segment
	nb, nseg int // the size of the latest slab of each
}

// newBlock returns a block holding b, from the current slab.
func (s *slabs) newBlock(b Block) *Block {
	if len(s.blocks) == 0 {
		s.nb = min(max(2*s.nb, slabMin), slabMax)
		s.blocks = make([]Block, s.nb)
	}
	p := &s.blocks[0]
	*p = b
	s.blocks = s.blocks[1:]
	return p
}

// newSeg returns a segment holding g, from the current slab.
func (s *slabs) newSeg(g segment) *segment {
	if len(s.segs) == 0 {
		s.nseg = min(max(2*s.nseg, slabMin), slabMax)
		s.segs = make([]segment, s.nseg)
	}
	p := &s.segs[0]
	*p = g
	s.segs = s.segs[1:]
	return p
}
