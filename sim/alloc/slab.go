package alloc

// Blocks are carved from slabs the allocator owns: a step of 65,536
// layers splits a block at nearly every request, and a heap allocation
// per block was a fifth of its replay's allocations (the FuzzSizes
// repeat_65536 seeds, BenchmarkFuzzCorpus).
//
// A block merged into its neighbour (or the block of a released segment)
// is done with, and the next block is made in its place: the replay of a
// 65,536-layer step merges and splits about a million times, and writing
// each new block into fresh memory was an eighth of the allocator's time
// under the race detector. Nothing reads a dead block but the caller of
// Release, at once (its stream and whether it is pending, for a trace),
// so a dead block keeps its fields until it is made again; only its next
// links the dead.
//
// Blocks name each other (neighbours, free lists, the dead) by Ref, their
// place in the slabs, not by pointer, and segments are the allocator's
// table of them by creation (Allocator.segs), named by index: a Block
// holds no pointer, so a slab is memory the garbage collector never
// scans, and the allocator's writes of a link, at every split, merge and
// free-list change, pass no write barrier. (With *Block links and
// *segment, the barrier's buffer flushes were a quarter of
// BenchmarkEvaluateLlama70B3D's CPU profile, a third of them the
// allocator's, and its slabs were scanned at every collection.)

// slabShift: a slab holds 1<<slabShift blocks (48 KiB). Every slab has
// that size, so that reading a block by its Ref checks one bound, the
// slab's index: the place in it is a mask, below the array's length. (At
// sizes doubling from 16 blocks, each read checked the place against its
// slab's length too: BenchmarkEvaluateLlama70B3D without the collector
// took 42.6 M instructions an op that way, 42.0 M this way, 40.9 M with
// *Block links.) A short replay pays for a whole slab, once: the replays
// of a search or of a pipeline's stages hand their slabs on (Slabs).
const (
	slabShift = 10
	slabMax   = 1 << slabShift
)

// slab is a slab of blocks.
type slab = [slabMax]Block

// Ref names a block of an allocator: its slab's index << slabShift + its
// place in the slab. 0 names none (a block's missing neighbour, the end
// of the dead list): the first slab's first block is never used. A
// caller may keep a Ref instead of a *Block (the replay's tensors:
// pointer-free lists, slab.go's note) and read the block with
// Allocator.Block.
type Ref int32

// Ref is b's name in its allocator.
//
//go:norace
func (b *Block) Ref() Ref { return b.ref }

// Block is the block r names, nil for 0.
//
//go:norace
func (a *Allocator) Block(r Ref) *Block {
	if r == 0 {
		return nil
	}
	return a.at(r)
}

// slabs are the allocator's blocks.
type slabs struct {
	// The current slab is held.blocks' last, used up to usedB (a count,
	// not a shorter slice: a slice header stored at every new block was
	// a pointer write, which the garbage collector's write barrier
	// records while it marks).
	usedB int
	dead  Ref // blocks done with, linked by next
	// held are every slab the allocator carved from (the current one
	// too), by Ref, and spare those a finished allocator left it (Reuse),
	// taken before a new slab is made: Slabs hands both on.
	held, spare Slabs
}

// Slabs are the blocks and segment table of allocators done with, for
// another to carve its own from (Allocator.Reuse): the replays of a
// search make and drop hundreds of allocators of similar sizes. Every
// block carved from a slab and every segment is written whole first
// (newBlock, newSegment), so nothing a finished allocator left in them
// is read.
type Slabs struct {
	blocks []*slab
	segs   []segment
}

// Slabs hands over a's slabs and segment table, those it carved from
// and those it was given and did not use; a must not be used after.
func (a *Allocator) Slabs() Slabs {
	segs := a.segs
	if segs == nil { // no segment made: the table it was given
		segs = a.spare.segs
	}
	s := Slabs{append(a.held.blocks, a.spare.blocks...), segs[:0]}
	a.slabs, a.segs = slabs{}, nil
	return s
}

// Reuse gives a, before its first request, slabs to carve its blocks
// and a segment table to fill before it makes new ones.
func (a *Allocator) Reuse(s Slabs) { a.spare = s }

// at is the block r names (r != 0).
//
//go:norace
func (s *slabs) at(r Ref) *Block {
	return &s.held.blocks[r>>slabShift][r&(slabMax-1)]
}

// newBlock returns a block holding b, its ref set: a dead one, or one
// from the current slab.
//
//go:norace
func (s *slabs) newBlock(b Block) *Block {
	if r := s.dead; r != 0 {
		p := s.at(r)
		s.dead = p.next
		b.ref = r
		*p = b
		return p
	}
	n := len(s.held.blocks)
	if n == 0 || s.usedB == slabMax {
		s.nextSlab()
		n++
	}
	b.ref = Ref((n-1)<<slabShift + s.usedB)
	p := &s.held.blocks[n-1][s.usedB]
	*p = b
	s.usedB++
	return p
}

// nextSlab starts the next slab of blocks: a spare one, or a new one,
// held from then on. The first slab's first block is left out (Ref 0).
//
//go:norace
func (s *slabs) nextSlab() {
	var x *slab
	if n := len(s.spare.blocks); n > 0 {
		x = s.spare.blocks[n-1]
		s.spare.blocks[n-1] = nil
		s.spare.blocks = s.spare.blocks[:n-1]
	} else {
		x = new(slab)
	}
	s.usedB = 0
	if len(s.held.blocks) == 0 {
		s.usedB = 1
	}
	s.held.blocks = append(s.held.blocks, x)
}

// dropBlock marks b as done with: merged into a neighbour, or the
// block of a released segment.
//
//go:norace
func (s *slabs) dropBlock(b *Block) {
	b.next, s.dead = s.dead, b.ref
}
