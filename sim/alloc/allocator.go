package alloc

import (
	"cmp"
	"slices"
)

// Allocator models PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp) closely enough to give reserved
// memory and fragmentation:
//
//   - requests round up to 512 B (kMinBlockSize);
//   - requests <= 1 MiB come from the small pool, carved from 2 MiB
//     segments (kSmallBuffer); larger ones from the large pool, whose new
//     segments are 20 MiB (kLargeBuffer) for requests under 10 MiB
//     (kMinLargeAlloc) and the request rounded up to 2 MiB (kRoundLarge)
//     otherwise;
//   - a free block is found best-fit within the pool and split when the
//     remainder is >= 512 B (small) or > 1 MiB (large);
//   - freed blocks merge with free neighbours and stay cached;
//   - when a new segment does not fit under the limit, cached segments
//     that are wholly free are released and the request is retried
//     (Retries counts it); if it still does not fit, that allocation is
//     the OOM;
//   - every segment belongs to the stream that allocated it, and its
//     blocks serve only that stream's requests (streams.go).
type Allocator struct {
	Limit     int64 // bytes PyTorch may reserve (capacity minus non-PyTorch memory)
	Reserved  int64
	Allocated int64
	lists     []freeList // per list (a stream's small or large pool, listOf)
	// segs are every segment made, in creation order (a block's seg is
	// its index), released ones too: a Block names its segment by index
	// and holds no pointer (slab.go).
	segs []segment

	// Retries counts the requests that did not fit under the limit at
	// first and were retried after the cache was released, up to and
	// including the OOM: torch.cuda.memory_stats()["num_alloc_retries"].
	// PyTorch's malloc calls alloc_block again with isRetry once
	// release_cached_blocks has run, and alloc_block counts each such call
	// whether or not the cache held anything, and whether or not the retry
	// fits (c10/cuda/CUDACachingAllocator.cpp at v2.0.0,
	// DeviceCachingAllocator::malloc and alloc_block; the step between,
	// release_available_cached_blocks, retries uncounted and only with
	// max_split_size_mb set, which memsh does not model). Requests after
	// the OOM, where PyTorch would have raised, are not counted.
	Retries int

	// State just before the first request that did not fit, for the OOM
	// message (PyTorch reports memory before the failed allocation).
	FailAllocated, FailReserved int64
	over                        bool     // a request has failed
	whole                       []Ref    // whole[:nwhole]: free blocks releaseCached gives back (releasable): whole free segments, free pages
	nwhole                      int      // (a count, not a shorter slice: freeList's note on write barriers)
	releasing                   []*Block // releaseCached's list, kept for its next call

	Expandable bool // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True

	// Private, when not the default stream, is a private pool in use (a
	// CUDA graph tree's): release_cached_blocks frees a graph pool's
	// cached blocks only once no graph uses it, so its segments are never
	// released. FailPrivateFree is what its free blocks held just before
	// the first request that did not fit (PyTorch's OOM message counts
	// them as allocated "in private pools").
	Private         Stream
	FailPrivateFree int64

	streams           // the streams' pools, record_stream and pending frees (streams.go)
	slabs             // where blocks are made (slab.go)
	indexAbove [2]int // tests: index a new small (0) or large (1) free list from this length on

	// Observe, when set, is told of each change to device memory the
	// allocator makes: a segment allocated or freed (cudaMalloc, cudaFree),
	// pages mapped or unmapped in an expandable segment (a memory
	// snapshot's segment events).
	Observe  func(e SegmentEvent)
	nextBase int64 // the next segment's address

	// Grew, when set, is told of each request that no cached block fits,
	// before the allocator reserves memory for it: what was cached then
	// and could not be reused (the cause of fragmentation).
	Grew func(g Growth)
}

// freeList is what the allocator keeps of a stream's small or large pool
// (listOf): its free blocks, and its unmapped blocks with expandable
// segments. One struct per list, rather than a slice of each field,
// halves the reads of an allocation or a free: each was a slice header
// and an element (the replay of a 65,536-layer step makes 2.5 million).
type freeList struct {
	// The free blocks are blocks[:n], their sizes sizes[:n], in list
	// order (a scan reads the sizes without visiting the blocks). The
	// slices keep their length, and n says how much of them is listed:
	// storing a slice header into the list is a pointer write, which
	// the garbage collector's write barrier records while it marks, and
	// a length stored at every add and remove was two of them each
	// (the barrier was 15 % of BenchmarkEvaluateLlama70B3D's CPU
	// profile, half of it in addFree and removeFree). The blocks are
	// refs, not pointers: no barrier at all (slab.go).
	blocks []Ref
	sizes  []int64
	n      int
	index  freeIndex // the free blocks by size
	bytes  int64     // in free blocks
	// largest is the size of the largest free block while largestKnown,
	// and nLargest how many free blocks have that size: removing the
	// last of them forgets it until Cached scans again. (Without the
	// count, removing any of them forgot it: the replay asks Cached at
	// each new peak of allocated memory, and its scans of the lists were
	// a hundredth of BenchmarkEvaluateLlama70B3D's instructions, where
	// many free blocks share the largest size.)
	largest      int64
	nLargest     int
	largestKnown bool
	unmapped     addrList // unmapped blocks of expandable segments, by address
}

// pushGrow lists b, of size bytes, at pos past the length of l's lists
// (addFree lists it when they have room, without a call).
//
//go:norace
func (l *freeList) pushGrow(pos int, b Ref, size int64) {
	put(&l.blocks, pos, b)
	put(&l.sizes, pos, size)
}

// put stores x at (*s)[i], i <= len(*s). Only when s must grow does it
// store a new header, of the whole capacity, so that the next puts store
// none.
//
//go:norace
func put[T any](s *[]T, i int, x T) {
	if i < len(*s) {
		(*s)[i] = x
		return
	}
	t := append((*s)[:i], x)
	*s = t[:cap(t)]
}

// newSegment makes a segment of size bytes in pool of stream s at the
// next address, and its one block, holding all of it (free, or unmapped
// when expandable).
//
//go:norace
func (a *Allocator) newSegment(size int64, pool int, s Stream, expandable bool) *Block {
	if a.nextBase == 0 {
		a.nextBase = baseAddress
	}
	if a.segs == nil { // the first: on the table Reuse gave
		a.segs, a.spare.segs = a.spare.segs[:0], nil
	}
	i := int32(len(a.segs))
	b := a.newBlock(Block{seg: i, Size: size, free: !expandable, unmapped: expandable, stream: s, pool: uint8(pool), expandable: expandable})
	a.segs = append(a.segs, segment{size: size, pool: pool, stream: s, base: a.nextBase, expandable: expandable, first: b.ref})
	a.nextBase += roundUp(size, roundLarge)
	return b
}

// segOf is b's segment.
//
//go:norace
func (a *Allocator) segOf(b *Block) *segment { return &a.segs[b.seg] }

const (
	minBlock      = 512
	smallSize     = 1 << 20
	smallBuffer   = 2 << 20
	largeBuffer   = 20 << 20
	minLargeAlloc = 10 << 20
	roundLarge    = 2 << 20
)

type segment struct {
	size       int64
	pool       int    // 0: small, 1: large
	first      Ref    // its block at offset 0
	base       int64  // device address of its first byte
	released   bool   // returned to the device by releaseCached
	expandable bool   // virtual address space mapped page by page
	stream     Stream // the stream whose request made it; its blocks serve only that stream
}

// Block is a range of a segment: an allocation while in use, else cached.
// It holds no pointer (slab.go): its neighbours are refs, its segment an
// index in the allocator's table, and the segment's stream, pool and
// kind, which the free lists read at every request, are copied into it.
type Block struct {
	off, Size  int64
	prev, next Ref   // its neighbours in the segment (0: none)
	ref        Ref   // its own
	seg        int32 // its segment: Allocator.segs[seg] (the creation order)
	pos        int32 // index in its pool's free list while free
	wpos       int32 // 1 + its index in whole while listed there (releasable), else 0
	stream     Stream
	pool       uint8 // its segment's: 0 small, 1 large
	expandable bool  // its segment's
	free       bool
	unmapped   bool // in an expandable segment, address space with no pages mapped
	pending    bool // released, waiting for the streams that used it (not free yet: streams.go)
}

// Stream is the stream the block belongs to: its segment's.
//
//go:norace
func (b *Block) Stream() Stream { return b.stream }

// list is the free list of the block's stream and pool.
//
//go:norace
func (b *Block) list() int { return listOf(b.stream, int(b.pool)) }

// Addr is b's device address.
//
//go:norace
func (a *Allocator) Addr(b *Block) int64 { return a.segs[b.seg].base + b.off }

// Alloc returns the block for a request of n bytes on the default
// stream; ok is false when the request does not fit under the limit even
// after releasing cached segments (the block is still granted so the
// replay can go on and report what the step would need).
//
//go:norace
func (a *Allocator) Alloc(n int64) (blk *Block, ok bool) {
	return a.AllocOn(n, DefaultStream)
}

// AllocOn is Alloc for a request of stream s: only blocks of s's pools
// serve it, and a new segment belongs to s.
//
//go:norace
func (a *Allocator) AllocOn(n int64, s Stream) (blk *Block, ok bool) {
	a.clock++
	// A private pool takes no expandable segment (alloc_block: "our
	// checkpointing logic for private pools doesn't support the
	// expandable_segments_ structure yet").
	if a.Expandable && (a.Private == DefaultStream || s != a.Private) {
		return a.allocExpandable(n, s)
	}
	size := RoundSize(n)
	pool := poolOf(size)
	ok = true
	list := listOf(s, pool)
	var b *Block
	if l := a.freeList(list); l != nil && l.index.midOn { // bestFit's usual case, without its call
		if i := l.index.mid.best(size, l.sizes[:l.n]); i >= 0 {
			b = a.at(l.blocks[i])
		}
	} else {
		b = a.bestFit(list, size)
	}
	if b == nil {
		a.grew(listOf(s, pool), size)
		segSize := segmentSize(size)
		if a.Limit > 0 && a.Reserved+segSize > a.Limit {
			a.retried()
			if a.nwhole > 0 || len(a.pending) > 0 {
				a.releaseCached(s)
			}
			if a.Reserved+segSize > a.Limit {
				// Out of memory. The first such request is the OOM; the
				// replay goes on (granting past the limit, still releasing
				// cached segments as PyTorch would) to report what the step
				// needs on a device just large enough.
				ok = false
				if !a.over {
					a.failed()
					a.over = true
				}
			}
		}
		b = a.newSegment(segSize, pool, s, false)
		a.Reserved += segSize
		a.observe(SegmentAlloc, s, a.segs[b.seg].base, segSize)
		// The new segment's block is taken at once: listing it as free
		// and taking it off again changed nothing (past the limit, where
		// nearly every request makes a segment, it was a third of the
		// free-list work of a 65,536-layer step).
	} else {
		a.unlist(&a.lists[list], b) // bestFit's pick: listed at b.pos of its list
	}
	rest := b.Size - size
	if (pool == 0 && rest >= minBlock) || (pool == 1 && rest > smallSize) {
		a.addFree(a.splitAt(b, size))
	}
	b.free = false
	a.Allocated += b.Size
	a.allocatedOn(b.stream, b.Size)
	return b, ok
}

// retried counts a request retried after releasing the cache (Retries),
// until the OOM.
//
//go:norace
func (a *Allocator) retried() {
	if !a.over {
		a.Retries++
	}
}

// failed records the figures of the first request that did not fit.
//
//go:norace
func (a *Allocator) failed() {
	a.FailAllocated, a.FailReserved = a.Allocated, a.Reserved
	if a.Private != DefaultStream {
		a.FailPrivateFree = a.ReservedOn(a.Private) - a.AllocatedOn(a.Private)
	}
}

// Release returns a block to the cache, merging free neighbours. A block
// that other streams used (RecordStream) stops counting as allocated but
// is not reused until those streams are done with it (streams.go).
//
//go:norace
func (a *Allocator) Release(b *Block) {
	a.clock++
	a.Allocated -= b.Size
	a.allocatedOn(b.stream, -b.Size)
	if len(a.uses) > 0 { // no map read when no block is shared (each is checked under -race)
		if uses := a.uses[b]; len(uses) > 0 {
			delete(a.uses, b)
			a.deferFree(b, uses)
			return
		}
	}
	b.free = true // freeBlock, without its calls where no neighbour is free (most frees)
	if n, p := b.next, b.prev; (n != 0 && a.at(n).free) || (p != 0 && a.at(p).free) {
		b = a.joinFree(b)
	}
	a.addFree(b)
}

// freeBlock makes b free and merges it with free neighbours.
//
//go:norace
func (a *Allocator) freeBlock(b *Block) {
	b.free = true
	a.addFree(a.joinFree(b))
}

// joinFree merges b with its free neighbours, taking them off the free
// lists, and returns the merged block (not listed).
//
//go:norace
func (a *Allocator) joinFree(b *Block) *Block {
	if n := b.next; n != 0 {
		if nb := a.at(n); nb.free {
			a.removeFree(nb)
			a.mergeNext(b)
		}
	}
	if p := b.prev; p != 0 {
		if pb := a.at(p); pb.free {
			a.removeFree(pb)
			b = a.mergeNext(pb)
		}
	}
	return b
}

// splitAt cuts b after its first size bytes and returns the new block
// holding the rest, with b's state (free or unmapped); the caller lists it.
//
//go:norace
func (a *Allocator) splitAt(b *Block, size int64) *Block {
	r := a.newBlock(Block{seg: b.seg, off: b.off + size, Size: b.Size - size, free: b.free, unmapped: b.unmapped, prev: b.ref, next: b.next,
		stream: b.stream, pool: b.pool, expandable: b.expandable})
	if b.next != 0 {
		a.at(b.next).prev = r.ref
	}
	b.next, b.Size = r.ref, size
	return r
}

// mergeNext joins the block after b into b and returns b; the caller has
// taken that block off its list, and it is done with.
//
//go:norace
func (a *Allocator) mergeNext(b *Block) *Block {
	n := a.at(b.next)
	b.Size += n.Size
	b.next = n.next
	if n.next != 0 {
		a.at(n.next).prev = b.ref
	}
	a.dropBlock(n)
	return b
}

// freeList is free list list, nil when it was never made.
//
//go:norace
func (a *Allocator) freeList(list int) *freeList {
	if list < len(a.lists) {
		return &a.lists[list]
	}
	return nil
}

//go:norace
func (a *Allocator) bestFit(list int, size int64) *Block {
	if list >= len(a.lists) {
		return nil
	}
	// The first block in free-list order of the smallest size >= size:
	// freeIndex.best's cases, without its call.
	l := &a.lists[list]
	x, fl, sizes := &l.index, l.blocks[:l.n], l.sizes[:l.n]
	i := -1
	switch {
	case x.active:
		i = x.bestFit(size, sizes)
	case x.midOn:
		i = x.mid.best(size, sizes)
	default: // a short list: scanned
		i = scanSizes(size, sizes)
	}
	if i < 0 {
		return nil
	}
	return a.at(fl[i])
}

// addFree puts b on its pool's free list. (It and removeFree read each
// field once: under the race detector every read is a checked call, and
// the two were an eighth of the instructions of the FuzzSizes
// repeat_65536 DDP step under -race.)
//
//go:norace
func (a *Allocator) addFree(b *Block) {
	l := &a.lists[a.grow(b.list())]
	size := b.Size
	l.bytes += size
	switch {
	case size > l.largest: // still the largest when it was known
		l.largest, l.nLargest = size, 1
	case size == l.largest:
		l.nLargest++
	}
	pos := l.n // b goes last
	if pos < len(l.blocks) && pos < len(l.sizes) {
		l.blocks[pos], l.sizes[pos] = b.ref, size
	} else {
		l.pushGrow(pos, b.ref, size)
	}
	l.n = pos + 1
	b.pos = int32(pos)
	switch x := &l.index; {
	case x.midOn && l.n <= x.limit(): // added's case of the buckets, without its call (the usual one: a 70B stage's lists)
		x.mid.add(size, pos)
	case x.active || x.midOn || l.n > x.limit()/16: // else added has nothing to do (a short list, scanned)
		x.added(size, pos, l.sizes[:l.n])
	}
	if releasable(b) {
		put(&a.whole, a.nwhole, b.ref)
		a.nwhole++
		b.wpos = int32(a.nwhole)
	}
}

// releasable reports whether releaseCached can give the free block b back:
// a whole free segment, or a free block of an expandable segment holding
// at least one whole page.
//
//go:norace
func releasable(b *Block) bool {
	if b.expandable {
		page := pageSize(int(b.pool))
		return roundUp(b.off, page)+page <= b.off+b.Size
	}
	return b.prev == 0 && b.next == 0
}

// listed reports whether the free block b is in its pool's free list.
//
//go:norace
func (a *Allocator) listed(b *Block) bool {
	list := b.list()
	return list < len(a.lists) && int(b.pos) < a.lists[list].n && a.lists[list].blocks[b.pos] == b.ref
}

//go:norace
func (a *Allocator) removeFree(b *Block) {
	pool := b.list()
	if pool >= len(a.lists) {
		return
	}
	l := &a.lists[pool]
	if i := int(b.pos); i >= l.n || l.blocks[i] != b.ref {
		return // not listed
	}
	a.unlist(l, b)
}

// unlist takes the free block b off l, the free list that holds it at
// b.pos (removeFree's checks passed, or bestFit's pick), and off the
// releasable blocks when it is there. (AllocOn takes its pick here:
// removeFree's checks read the block's segment and the list again.)
//
//go:norace
func (a *Allocator) unlist(l *freeList, b *Block) {
	if w := b.wpos; w > 0 { // releasable: the last of whole moves into its place
		n := a.nwhole - 1
		last := a.whole[n]
		a.whole[w-1], a.at(last).wpos = last, w
		a.nwhole, b.wpos = n, 0
	}
	fl, sz := l.blocks[:l.n], l.sizes[:l.n]
	i := int(b.pos)
	size := b.Size
	l.bytes -= size
	if size >= l.largest {
		if l.nLargest--; l.nLargest <= 0 {
			l.largestKnown = false
		}
	}
	movedTo, movedSize := -1, int64(0)
	from := len(fl) - 1
	if last := fl[from]; last != b.ref { // the last block moves into the hole
		movedTo, movedSize = i, sz[from]
		fl[i], a.at(last).pos = last, int32(i)
		sz[i] = movedSize
	}
	l.n = from
	switch x := &l.index; {
	case x.midOn && from >= x.limit()/64: // removed's case of the buckets, without its call
		if movedTo < 0 {
			x.mid.remove(size, from, size, from)
		} else {
			x.mid.remove(size, movedTo, movedSize, from)
		}
	case x.active || x.midOn: // else removed has nothing to do (a short list, scanned)
		x.removed(size, movedTo, movedSize, sz[:from])
	}
}

// releaseCached frees every segment that holds no allocation
// (release_cached_blocks, as PyTorch does before reporting an OOM) and,
// with expandable segments, unmaps the whole pages inside every free block
// (unmap_block). It takes them from the list of releasable blocks rather
// than scanning the segments or the free blocks: past the limit it runs
// at every new segment, and a scan made a step with 65,536 layers replay
// for minutes. They are released in the order they were created, as a
// scan of the segments would. Blocks released while other streams still
// used them are freed first (synchronize_and_free_events).
//
// Until the OOM every stream's cached blocks are released, as
// release_cached_blocks does. Past it, where PyTorch would have raised and
// the replay goes on only to report what the step needs, a request
// releases its own stream's cached blocks alone (memsh's choice, not
// PyTorch's): releasing every stream's unmapped the other streams' cached
// pages at one request and mapped them again at their stream's next, and
// a 65,536-layer step past the limit with expandable segments took half
// again as much CPU. The figures of the OOM itself (FailAllocated,
// FailReserved) are taken before.
//
//go:norace
func (a *Allocator) releaseCached(s Stream) {
	a.freePending()
	whole := a.releasing[:0] // the previous call's list, done with
	for _, r := range a.whole[:a.nwhole] {
		b := a.at(r)
		if a.Private != DefaultStream && b.stream == a.Private {
			continue // a private pool in use keeps its segments
		}
		if !a.over || b.stream == s {
			whole = append(whole, b)
		}
	}
	a.releasing = whole
	slices.SortFunc(whole, byCreation)
	for _, b := range whole {
		if b.expandable {
			a.unmapBlock(b)
			continue
		}
		a.removeFree(b)
		seg := a.segOf(b)
		a.Reserved -= seg.size
		seg.released = true
		a.observe(SegmentFree, seg.stream, seg.base, seg.size)
		a.dropBlock(b)
	}
}

// byCreation orders blocks as they were created: by segment (the index
// of a segment is its creation order), then by offset ((seg, off) is
// unique: one order). A named function rather than a literal in
// releaseCached, so that it carries //go:norace too.
//
//go:norace
func byCreation(x, y *Block) int {
	if c := cmp.Compare(x.seg, y.seg); c != 0 {
		return c
	}
	return cmp.Compare(x.off, y.off)
}
