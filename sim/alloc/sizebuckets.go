package alloc

import (
	"math"
	"math/bits"
)

// sizeBuckets finds the best-fit block of a free list of middling
// length (freeIndex.midOn: from a sixteenth of indexAbove, 64 blocks, to
// indexAbove, where the classes take over) without a scan of the whole
// list. Its blocks are kept in buckets by size, eight to a power of two
// (bucketOf), each bucket a set of list positions, one bit a position.
// Every size of a bucket is below every size of the next, so the best
// fit is in the request's own bucket when a block there fits, else in
// the first bucket above it that holds a block (a bit mask says which
// do); within the bucket, read in list order (the set bits from the
// lowest), the first block of the smallest size that fits (an exact fit
// ends the search; so does the bucket's smallest size, when the request
// is no larger: bucket.min). That is the first block in list order of the
// smallest size that fits, the very block a scan of the list picks
// (FuzzAllocator and TestSizeBucketsAgainstScan check every pick against
// such a scan).
//
// The list removes a block by moving its last block into the hole; a
// bucket clears the hole's bit, and the moved block's bucket moves its
// bit: a constant time each. (Buckets of (size, position) entries in
// list order shifted their entries at each removal and each move, 36,000
// times per BenchmarkEvaluateLlama70B3D evaluation over 655,000 entries
// in all: 12 % of its instructions, cachegrind.)
//
// The scan read every free block at every request: a 70B plan's stage
// asks with lists of 32 to 300 blocks, Llama 3 405B's on 16 stages with
// up to 700 (17 M requests in BenchmarkSearchLlama405B16384, most of the
// scan's work in lists past 64 blocks). Below 64 blocks the scan stays:
// keeping buckets costs more than it saves there.
type sizeBuckets struct {
	buckets []bucket                 // by bucketOf, as far as a listed size needs
	full    [bucketCount / 64]uint64 // bit b%64 of word b/64: buckets[b] holds a block
	// at is the bucket of the block at each list position (as far as
	// positions were listed), so that a removal reads the buckets of the
	// block it takes and the block it moves rather than working them out
	// from their sizes again (bucketOf twice a removal: a hundredth of
	// BenchmarkEvaluateLlama70B3D's instructions).
	at []uint16
}

// bucket is one bucket's blocks: bit p%64 of set[p/64] for the block at
// list position p (words past the highest position it held are not
// kept), n blocks in all. While nMin > 0, min is the smallest size of
// its blocks and nMin how many blocks have it: a request of at most min
// bytes is best fitted by the first of them in list order (firstOfSize),
// found without reading the bucket's other blocks. (A request with no
// block of its own size in its bucket read every block of the bucket
// before: in BenchmarkEvaluateLlama70B3D, 6,700 requests of an
// evaluation read 12 blocks each, where 12,200 exact fits read one.) The
// last block of size min leaving forgets it, until a search reads the
// whole bucket again.
type bucket struct {
	set     []uint64
	n, nMin int32 // (a bucket holds at most indexAbove blocks: 40 bytes a bucket, 512 of them a list)
	min     int64
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
// smallest size >= n, or -1; sizes are the list's (sizes[p] is position
// p's).
//
//go:norace
func (s *sizeBuckets) best(n int64, sizes []int64) int {
	b := bucketOf(n)
	if b < len(s.buckets) && s.buckets[b].n > 0 {
		if p := s.buckets[b].best(sizes, n); p >= 0 {
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
			return s.buckets[w*64+bits.TrailingZeros64(word)].best(sizes, n)
		}
	}
	return -1
}

// best returns the position of k's first block in list order of the
// smallest size >= n, or -1 (k holds a block). When it reads all of k's
// blocks it learns their smallest size and its count.
//
//go:norace
func (k *bucket) best(sizes []int64, n int64) int {
	if k.nMin > 0 && n <= k.min { // every block fits: the first of the smallest
		return firstOfSize(k.set, sizes, k.min)
	}
	p, low, count := firstSmallest(k.set, sizes, n)
	if count > 0 {
		k.min, k.nMin = low, int32(count)
	}
	return p
}

// firstOfSize returns the first position in set (in list order: the
// lowest) of a block of size bytes; set holds one.
//
//go:norace
func firstOfSize(set []uint64, sizes []int64, size int64) int {
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			if p := w<<6 | bits.TrailingZeros64(word); sizes[p] == size {
				return p
			}
		}
	}
	return -1
}

// firstSmallest returns the first position in set (in list order: the
// lowest) of the smallest size >= n, or -1. Sizes and n are positive,
// so s-n read unsigned is the room a fitting size leaves (below 1<<63)
// and, for a size too small, at least 1<<63.
//
// When it reads every position (no exact fit ends the search), it also
// returns the smallest size in set and how many positions hold it (count
// 0 when it stopped early).
//
//go:norace
func firstSmallest(set []uint64, sizes []int64, n int64) (best int, low int64, count int) {
	best, room := -1, uint64(1)<<63
	low = math.MaxInt64
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			p := w<<6 | bits.TrailingZeros64(word)
			size := sizes[p]
			if r := uint64(size - n); r < room {
				if r == 0 { // nothing fits better, nothing of n bytes is earlier
					return p, 0, 0
				}
				best, room = p, r
			}
			switch {
			case size < low:
				low, count = size, 1
			case size == low:
				count++
			}
		}
	}
	return best, low, count
}

// add lists a block of size at position pos, the list's last.
//
//go:norace
func (s *sizeBuckets) add(size int64, pos int) {
	b := bucketOf(size)
	if len(s.buckets) <= b {
		if cap(s.buckets) <= b {
			// Room for every bucket at once (16 KiB), not a list regrown
			// bucket by bucket up to a large block's: the search's
			// replays made twice as many bytes growing them.
			grown := make([]bucket, len(s.buckets), bucketCount)
			copy(grown, s.buckets)
			s.buckets = grown
		}
		s.buckets = s.buckets[:b+1] // past the old length: zero, never written
	}
	k := &s.buckets[b]
	for len(k.set) <= pos>>6 {
		k.set = append(k.set, 0)
	}
	k.set[pos>>6] |= 1 << (pos & 63)
	switch {
	case k.n == 0:
		k.min, k.nMin = size, 1
	case k.nMin == 0: // its smallest size unknown
	case size < k.min:
		k.min, k.nMin = size, 1
	case size == k.min:
		k.nMin++
	}
	k.n++
	s.full[b/64] |= 1 << (b % 64)
	put(&s.at, pos, uint16(b))
}

// remove unlists the block of size at position pos, the list's last
// block, of movedSize, moving into its place from position from (from
// == pos: the block was the last).
//
//go:norace
func (s *sizeBuckets) remove(size int64, pos int, movedSize int64, from int) {
	at := s.at
	b := int(at[pos]) // bucketOf(size)
	k := &s.buckets[b]
	k.set[pos>>6] &^= 1 << (pos & 63)
	if size == k.min && k.nMin > 0 { // the last of them leaving forgets it
		k.nMin--
	}
	if k.n--; k.n == 0 {
		s.full[b/64] &^= 1 << (b % 64)
	}
	if from != pos { // the list's last block is at pos now
		mb := at[from] // bucketOf(movedSize)
		m := &s.buckets[mb]
		m.set[from>>6] &^= 1 << (from & 63)
		m.set[pos>>6] |= 1 << (pos & 63)
		at[pos] = mb
	}
}

// reset unlists every block.
//
//go:norace
func (s *sizeBuckets) reset() {
	for b := range s.buckets {
		k := &s.buckets[b]
		clear(k.set)
		k.n, k.nMin = 0, 0
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
