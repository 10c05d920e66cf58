package alloc

// What the allocator tells its caller besides blocks: the free cache of a
// pool, the request that grew the reserve, and segment events for a
// memory snapshot.

// Growth is a request no cached block could serve: the reserve grows
// for it. Cache is what its pool held then, Other what the other pool of
// its stream held (blocks of one pool never serve the other: the small
// pool takes requests up to 1 MiB; other streams' pools serve neither).
type Growth struct {
	Request      int64 // bytes, rounded to 512 B
	Cache, Other Cache
}

// Cache describes the free blocks of one pool.
type Cache struct {
	Blocks  int
	Bytes   int64
	Largest int64 // the largest free block
}

// Cached returns what pool 0 (small) or 1 (large) of the default stream
// holds in free blocks.
//
//go:norace
func (a *Allocator) Cached(pool int) Cache { return a.CachedOn(DefaultStream, pool) }

// CachedOn returns what stream s's pool 0 (small) or 1 (large) holds in
// free blocks.
//
//go:norace
func (a *Allocator) CachedOn(s Stream, pool int) Cache { return a.cached(listOf(s, pool)) }

// cached is what free list list holds.
//
//go:norace
func (a *Allocator) cached(list int) Cache {
	if list >= len(a.lists) {
		return Cache{}
	}
	l := &a.lists[list]
	c := Cache{Blocks: l.n, Bytes: l.bytes}
	switch {
	case l.largestKnown:
	default:
		var m int64
		k := 0 // the blocks of size m
		if l.index.active {
			m, k = l.index.largest()
		} else {
			for _, n := range l.sizes[:l.n] {
				switch {
				case n > m:
					m, k = n, 1
				case n == m:
					k++
				}
			}
		}
		l.largest, l.nLargest, l.largestKnown = m, k, true
	}
	c.Largest = l.largest
	return c
}

// grew tells Grew about a request of size bytes in free list list that
// no free block fits.
//
//go:norace
func (a *Allocator) grew(list int, size int64) {
	if a.Grew != nil {
		a.Grew(Growth{Request: size, Cache: a.cached(list), Other: a.cached(list ^ 1)})
	}
}

// SegmentEvent is a change of device memory: Kind is SegmentAlloc,
// SegmentFree, SegmentMap or SegmentUnmap, over [Addr, Addr+Size), on the
// segment's stream; or FreeCompleted, a released block that the streams
// which used it have finished with (streams.go), now free for reuse.
type SegmentEvent struct {
	Kind       string
	Addr, Size int64
	Stream     Stream
	Block      *Block // FreeCompleted: the block
}

// The kinds of SegmentEvent, as a PyTorch memory snapshot names them.
const (
	SegmentAlloc = "segment_alloc"
	SegmentFree  = "segment_free"
	SegmentMap   = "segment_map"
	SegmentUnmap = "segment_unmap"
	// FreeCompleted is a deferred free completing (free_completed).
	FreeCompleted = "free_completed"
)

// baseAddress is where the model places the first segment: device
// addresses as CUDA hands them out on x86-64 (0x7f..), so a snapshot reads
// like one PyTorch wrote. Segments follow each other, 2 MiB aligned, and
// an address is never reused.
const baseAddress = 0x7f0000000000

//go:norace
func (a *Allocator) observe(kind string, s Stream, addr, size int64) {
	switch kind {
	case SegmentAlloc, SegmentMap:
		a.reservedOn(s, size)
	case SegmentFree, SegmentUnmap:
		a.reservedOn(s, -size)
	}
	if a.Observe != nil {
		a.Observe(SegmentEvent{Kind: kind, Addr: addr, Size: size, Stream: s})
	}
}
