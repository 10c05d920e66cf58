package alloc

import "math/bits"

// sizeBuckets finds the best-fit block of a free list of middling
// length (freeIndex.midOn: from a sixteenth of indexAbove, 64 blocks, to
// indexAbove, where the classes take over) without a scan of the whole
// list. Its blocks are kept in buckets by size, eight to a power of two
// (bucketOf), each bucket a list of (size, position) entries in list
// order. Every size of a bucket is below every size of the next, so the
// best fit is in the request's own bucket when a block there fits, else
// in the first bucket above it that holds a block (a bit mask says which
// do); within the bucket, the first entry of the smallest size that fits
// (an exact fit ends the search). That is the first block in list order
// of the smallest size that fits, the very block a scan of the list
// picks (FuzzAllocator and TestSizeBucketsAgainstScan check every pick
// against such a scan).
//
// The list removes a block by moving its last block into the hole; a
// bucket does the same by shifting its entries (a binary search by
// position and a copy), which keeps it in list order.
//
// The scan read every free block at every request: a 70B plan's stage
// asks with lists of 32 to 300 blocks, Llama 3 405B's on 16 stages with
// up to 700 (17 M requests in BenchmarkSearchLlama405B16384, most of the
// scan's work in lists past 64 blocks). Below 64 blocks the scan stays:
// keeping buckets costs more than it saves there.
type sizeBuckets struct {
	buckets []bucket                 // by bucketOf, as far as a listed size needs
	full    [bucketCount / 64]uint64 // bit b%64 of word b/64: buckets[b] holds a block
}

// bucket is one bucket's entries, es[:n], in list order (a count, not a
// shorter slice: freeList's note on write barriers).
type bucket struct {
	es []bucketEntry
	n  int
}

// entries returns bucket b's entries.
//
//go:norace
func (s *sizeBuckets) entries(b int) []bucketEntry {
	k := &s.buckets[b]
	return k.es[:k.n]
}

// bucketEntry is a listed block: its size and position in the list.
type bucketEntry struct {
	size int64
	pos  int
}

// bucketOf is the bucket of blocks of size bytes (size > 0): sizes
// below 16 have one each; a larger size's bucket is its power of two and
// the three bits below its top bit (eight buckets to an octave). A larger
// size is never in an earlier bucket.
//
//go:norace
func bucketOf(size int64) int {
	if size < 16 {
		return int(size)
	}
	e := 63 - bits.LeadingZeros64(uint64(size))
	return 16 + (e-4)*8 + int(size>>(e-3)&7)
}

// bucketCount is the buckets of every positive int64 size.
const bucketCount = 512

// best returns the position of the first block in list order of the
// smallest size >= n, or -1.
//
//go:norace
func (s *sizeBuckets) best(n int64) int {
	b := bucketOf(n)
	if b < len(s.buckets) {
		if p := firstSmallest(s.entries(b), n); p >= 0 {
			return p
		}
	}
	// The first bucket past b that holds a block.
	for w := (b + 1) / 64; w < len(s.full); w++ {
		word := s.full[w]
		if w == (b+1)/64 {
			word &^= 1<<((b+1)%64) - 1
		}
		if word != 0 {
			return firstSmallest(s.entries(w*64+bits.TrailingZeros64(word)), n)
		}
	}
	return -1
}

// firstSmallest returns the position of the first entry (es is in
// list order) of the smallest size >= n, or -1. Sizes and n are
// positive, so s-n read unsigned is the room a fitting size leaves
// (below 1<<63) and, for a size too small, at least 1<<63.
//
//go:norace
func firstSmallest(es []bucketEntry, n int64) int {
	best, room := -1, uint64(1)<<63
	for _, e := range es {
		if r := uint64(e.size - n); r < room {
			if r == 0 { // nothing fits better, nothing of n bytes is earlier
				return e.pos
			}
			best, room = e.pos, r
		}
	}
	return best
}

// add lists a block of size at position pos, the list's last.
//
//go:norace
func (s *sizeBuckets) add(size int64, pos int) {
	b := bucketOf(size)
	for len(s.buckets) <= b {
		s.buckets = append(s.buckets, bucket{})
	}
	k := &s.buckets[b]
	put(&k.es, k.n, bucketEntry{size, pos})
	k.n++
	s.full[b/64] |= 1 << (b % 64)
}

// at returns the index in es (in list order) of the first entry at
// position pos or after it.
//
//go:norace
func at(es []bucketEntry, pos int) int {
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].pos < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// remove unlists the block of size at position pos, the list's last
// block, of movedSize, moving into its place from position from (from
// == pos: the block was the last).
//
//go:norace
func (s *sizeBuckets) remove(size int64, pos int, movedSize int64, from int) {
	b := bucketOf(size)
	es := s.entries(b)
	s.buckets[b].n--
	switch {
	case from == pos: // the list's last, so its bucket's last
		if len(es) == 1 {
			s.full[b/64] &^= 1 << (b % 64)
		}
	case bucketOf(movedSize) == b:
		// The moved block takes the entry at pos, in order; its own
		// entry, at the list's last position, was the bucket's last.
		es[at(es, pos)] = bucketEntry{movedSize, pos}
	default:
		i := at(es, pos)
		copy(es[i:], es[i+1:])
		if len(es) == 1 {
			s.full[b/64] &^= 1 << (b % 64)
		}
		s.move(movedSize, from, pos)
	}
}

// move notes that the block of size at position from, the list's last
// (so its bucket's last), is at to now.
//
//go:norace
func (s *sizeBuckets) move(size int64, from, to int) {
	es := s.entries(bucketOf(size))
	last := len(es) - 1
	i := at(es[:last], to)
	copy(es[i+1:], es[i:last])
	es[i] = bucketEntry{size, to}
}

// reset unlists every block.
//
//go:norace
func (s *sizeBuckets) reset() {
	for b := range s.buckets {
		s.buckets[b].n = 0
	}
	s.full = [bucketCount / 64]uint64{}
}

// rebuild lists the blocks of sizes (sizes[i] is position i's).
//
//go:norace
func (s *sizeBuckets) rebuild(sizes []int64) {
	s.reset()
	for i, n := range sizes {
		s.add(n, i)
	}
}
