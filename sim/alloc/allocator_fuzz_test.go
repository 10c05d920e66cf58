package alloc

import (
	"encoding/binary"
	"math"
	"math/bits"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// FuzzAllocator drives the caching-allocator model with arbitrary alloc
// and free sequences and checks its bookkeeping after every event:
// allocated never exceeds reserved and never goes negative, reserved is
// the sum of the segments, each segment's blocks tile it exactly, no two
// free neighbours are left unmerged, and the free lists hold exactly the
// free blocks of their pool.
//
// The input is read as events of 9 bytes: an opcode byte and a uint64.
// Even opcodes allocate (the size is the uint64, scaled by the opcode so
// that small, large and huge requests all occur) on the stream op>>3&3;
// op%8 == 3 records stream op>>3&3 on the live block the uint64 picks,
// op%8 == 5 synchronizes stream op>>3&3 up to now, and the other odd
// opcodes free the live block the uint64 picks. The first event's uint64
// is the limit; its top bit switches on expandable segments
// (allocator_expandable.go).
func FuzzAllocator(f *testing.F) {
	ev := func(op byte, n uint64) []byte {
		b := make([]byte, 9)
		b[0] = op
		binary.LittleEndian.PutUint64(b[1:], n)
		return b
	}
	cat := func(evs ...[]byte) []byte {
		var out []byte
		for _, e := range evs {
			out = append(out, e...)
		}
		return out
	}
	f.Add(cat(ev(0, 0), ev(2, 3<<20), ev(2, 5<<20), ev(1, 0), ev(1, 0), ev(0, 4096)))
	f.Add(cat(ev(0, 64<<20), ev(2, 30<<20), ev(2, 30<<20), ev(1, 0), ev(2, 32<<20), ev(2, 8<<20)))
	f.Add(cat(ev(0, 0), ev(0, 1), ev(0, 512), ev(0, 513), ev(1, 1), ev(0, 1<<20), ev(1, 0), ev(1, 0)))
	f.Add(cat(ev(0, 1<<40), ev(6, 1<<62), ev(6, 1<<62), ev(1, 0), ev(6, 1<<61)))
	const expandable = 1 << 63
	f.Add(cat(ev(0, expandable|100<<20), ev(2, 30<<20), ev(2, 30<<20), ev(0, 4096), ev(1, 0), ev(2, 50<<20), ev(1, 1), ev(2, 60<<20)))
	f.Add(cat(ev(0, expandable), ev(0, 1), ev(2, 3<<20), ev(1, 0), ev(0, 1<<20), ev(4, 1<<33), ev(1, 1), ev(4, 1<<34)))
	// Streams: a block of stream 1 used on stream 0, released, reused only
	// after stream 0 catches up.
	f.Add(cat(ev(0, 0), ev(2|8, 3<<20), ev(3, 0), ev(1, 0), ev(2|8, 3<<20), ev(5, 0), ev(2|8, 3<<20), ev(2, 3<<20)))
	f.Add(cat(ev(0, expandable|100<<20), ev(2|8, 30<<20), ev(3, 0), ev(1, 0), ev(2|16, 50<<20), ev(2|8, 30<<20), ev(2, 60<<20)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var a Allocator
		if len(data) >= 9 {
			lim := binary.LittleEndian.Uint64(data[1:9])
			a.Limit = int64(lim % (1 << 50))
			a.Expandable = lim>>63 == 1
			// Index the free lists from a few blocks on (freeindex.go), so
			// that short inputs exercise the index against the scan.
			a.indexAbove = [2]int{1 + int(data[0]%16), 1 + int(data[0]/16%16)}
			data = data[9:]
		}
		var live []*Block
		// The replay never asks for more than MaxBytes in all (checkTotals
		// bounds a step's tensors, each allocated at most a few times), so
		// neither does this driver: it skips requests past half of it.
		var requested int64
		if len(data) > 9*1000 {
			data = data[:9*1000] // the checks are quadratic: keep each input quick
		}
		for len(data) >= 9 {
			op, n := data[0], binary.LittleEndian.Uint64(data[1:9])
			data = data[9:]
			stream := Stream(op >> 3 & 3)
			switch {
			case op%8 == 5:
				a.Synchronize(stream, a.Mark())
			case op%8 == 3:
				if len(live) > 0 {
					a.RecordStream(live[int(n%uint64(len(live)))], stream)
				}
			case op%2 == 1:
				if len(live) == 0 {
					continue
				}
				i := int(n % uint64(len(live)))
				b := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				a.Release(b)
			default:
				var size int64
				switch op % 8 {
				case 0:
					size = int64(n % (2 << 20)) // small pool and its edge
				case 2:
					size = int64(n % (64 << 20)) // large pool, 20 MiB segments
				case 4:
					size = int64(n % (1 << 40)) // big tensors
				default:
					size = int64(n % uint64(units.MaxBytes+1)) // up to the byte limit
				}
				if size == 0 {
					size = 1 // the replay never requests 0 bytes (replay.allocate)
				}
				if requested > units.MaxBytes/2-size {
					continue
				}
				requested += size
				list := listOf(stream, poolOf(RoundSize(size)))
				if got, want := a.bestFit(list, RoundSize(size)), scanBestFit(&a, list, size); got != want {
					t.Fatalf("alloc(%d): the free index picks %v, the free-list scan %v", size, got, want)
				}
				retries, over := a.Retries, a.over
				b, ok := a.AllocOn(size, stream)
				if b == nil {
					t.Fatalf("alloc(%d) returned no block", size)
				}
				// num_alloc_retries: at most one a request, none without a
				// limit or past the OOM, and one at the OOM itself.
				if d := a.Retries - retries; d < 0 || d > 1 || (d == 1 && (a.Limit == 0 || over)) || (!ok && !over && d != 1) {
					t.Fatalf("alloc(%d): retries %d -> %d (limit %d, past the OOM before %v, ok %v)", size, retries, a.Retries, a.Limit, over, ok)
				}
				if b.free || b.pending || b.Size < size || b.Stream() != stream {
					t.Fatalf("alloc(%d) on stream %d returned block of %d bytes, free=%v, pending=%v, stream %d", size, stream, b.Size, b.free, b.pending, b.Stream())
				}
				live = append(live, b)
			}
			checkAllocator(t, &a, live)
		}
	})
}

// scanBestFit is the allocator's best fit by a scan of the free list, as
// it was before the free index: the first block in list order of the
// smallest size that fits.
func scanBestFit(a *Allocator, list int, n int64) *Block {
	size := RoundSize(n)
	if list >= len(a.lists) {
		return nil
	}
	var best *Block
	for _, r := range a.lists[list].blocks[:a.lists[list].n] {
		if b := a.at(r); b.Size >= size && (best == nil || b.Size < best.Size) {
			best = b
		}
	}
	return best
}

// checkAllocator checks the allocator's invariants against the blocks the
// caller holds.
func checkAllocator(t *testing.T, a *Allocator, live []*Block) {
	t.Helper()
	if a.Allocated < 0 || a.Allocated > a.Reserved {
		t.Fatalf("allocated %d, reserved %d: want 0 <= allocated <= reserved", a.Allocated, a.Reserved)
	}
	var held int64
	for _, b := range live {
		held += b.Size
		if b.free {
			t.Fatalf("a live block (%d bytes at %d) is marked free", b.Size, b.off)
		}
	}
	if held != a.Allocated {
		t.Fatalf("live blocks hold %d bytes, allocated says %d", held, a.Allocated)
	}
	var reserved, used, pending int64
	freeBlocks, unmapped := map[*Block]int{}, map[*Block]int{}
	byStream, usedBy := map[Stream]int64{}, map[Stream]int64{}
	for i := range a.segs {
		s := &a.segs[i]
		if s.released {
			continue // returned to the device
		}
		if !s.expandable {
			reserved += s.size
			byStream[s.stream] += s.size
		}
		if s.first == 0 || a.at(s.first).prev != 0 || a.at(s.first).off != 0 {
			t.Fatalf("segment of %d bytes has a bad first block", s.size)
		}
		var off int64
		for r := s.first; r != 0; r = a.at(r).next {
			b := a.at(r)
			if b.ref != r || int(b.seg) != i || b.off != off || b.Size <= 0 {
				t.Fatalf("segment of %d bytes: block at %d (want %d) of %d bytes is misplaced", s.size, b.off, off, b.Size)
			}
			if b.stream != s.stream || int(b.pool) != s.pool || b.expandable != s.expandable {
				t.Fatalf("segment of %d bytes: block at %d says stream %d, pool %d, expandable %v; its segment %d, %d, %v",
					s.size, b.off, b.stream, b.pool, b.expandable, s.stream, s.pool, s.expandable)
			}
			if b.next != 0 && a.at(b.next).prev != b.ref {
				t.Fatalf("segment of %d bytes: broken links at %d", s.size, b.off)
			}
			if b.unmapped {
				page := pageSize(s.pool)
				if !s.expandable || b.free || b.off%page != 0 || b.Size%page != 0 {
					t.Fatalf("segment of %d bytes: unmapped block of %d bytes at %d is not page-aligned address space of an expandable segment", s.size, b.Size, b.off)
				}
				if b.next != 0 && a.at(b.next).unmapped {
					t.Fatalf("segment of %d bytes: unmapped neighbours at %d and %d left unmerged", s.size, b.off, a.at(b.next).off)
				}
				unmapped[b] = b.list()
				off += b.Size
				continue
			}
			if s.expandable {
				reserved += b.Size
				byStream[s.stream] += b.Size
			}
			if b.free && b.pending {
				t.Fatalf("segment of %d bytes: block at %d both free and pending", s.size, b.off)
			}
			if b.pending {
				pending += b.Size
			}
			if b.free {
				if b.next != 0 && a.at(b.next).free {
					t.Fatalf("segment of %d bytes: free neighbours at %d and %d left unmerged", s.size, b.off, a.at(b.next).off)
				}
				freeBlocks[b] = b.list()
			} else if !b.pending {
				used += b.Size
				usedBy[s.stream] += b.Size
			}
			off += b.Size
		}
		if off != s.size {
			t.Fatalf("segment of %d bytes: blocks cover %d", s.size, off)
		}
	}
	if reserved != a.Reserved {
		t.Fatalf("segments hold %d bytes, reserved says %d", reserved, a.Reserved)
	}
	if used != a.Allocated {
		t.Fatalf("used blocks hold %d bytes, allocated says %d", used, a.Allocated)
	}
	if pending != a.Pending() {
		t.Fatalf("pending blocks hold %d bytes, the pending list %d", pending, a.Pending())
	}
	for s, n := range byStream {
		if a.ReservedOn(s) != n || a.PeakReservedOn(s) < n {
			t.Fatalf("stream %d: segments hold %d bytes, ReservedOn says %d, PeakReservedOn %d", s, n, a.ReservedOn(s), a.PeakReservedOn(s))
		}
		if a.AllocatedOn(s) != usedBy[s] {
			t.Fatalf("stream %d: used blocks hold %d bytes, AllocatedOn says %d", s, usedBy[s], a.AllocatedOn(s))
		}
	}
	n := 0
	for pool := range a.lists {
		l := &a.lists[pool]
		fl, sizes := l.blocks[:l.n], l.sizes[:l.n]
		for i, r := range fl {
			b := a.at(r)
			if int(b.pos) != i {
				t.Fatalf("free list %d: block at %d records position %d", pool, i, b.pos)
			}
			if len(sizes) != len(fl) || sizes[i] != b.Size {
				t.Fatalf("free list %d: block at %d holds %d bytes, the list's sizes say %v", pool, i, b.Size, sizes)
			}
			p, ok := freeBlocks[b]
			if !ok || p != pool {
				t.Fatalf("free list %d holds a block (%d bytes at %d) that is not a free block of that pool", pool, b.Size, b.off)
			}
			n++
		}
	}
	if n != len(freeBlocks) {
		t.Fatalf("free lists hold %d blocks, segments have %d free blocks", n, len(freeBlocks))
	}
	var cachedBytes int64
	for list := range a.lists {
		var bytes, largest int64
		for _, r := range a.lists[list].blocks[:a.lists[list].n] {
			bytes, largest = bytes+a.at(r).Size, max(largest, a.at(r).Size)
		}
		checkLargest(t, -1, list, &a.lists[list]) // kept since the last Cached
		c := a.CachedOn(Stream(list/2), list%2)
		if c.Bytes != bytes || c.Largest != largest || c.Blocks != a.lists[list].n {
			t.Fatalf("list %d: Cached says %+v, the free list holds %d blocks of %d bytes, the largest %d",
				list, c, a.lists[list].n, bytes, largest)
		}
		cachedBytes += c.Bytes
	}
	if cachedBytes+pending != a.Reserved-a.Allocated {
		t.Fatalf("free blocks hold %d bytes and pending ones %d, reserved - allocated is %d", cachedBytes, pending, a.Reserved-a.Allocated)
	}
	n = 0
	for pool := range a.lists {
		runs := a.lists[pool].unmapped.runs
		var l []*Block
		for _, r := range runs {
			if len(r.blocks) == 0 || len(r.blocks) > addrRunMax || len(r.keys) != len(r.blocks) {
				t.Fatalf("unmapped list %d has a run of %d blocks and %d keys (1 to %d)", pool, len(r.blocks), len(r.keys), addrRunMax)
			}
			for i, b := range r.blocks {
				if r.keys[i] != keyOf(b) {
					t.Fatalf("unmapped list %d lists a block at %d with the key of one at %d", pool, b.off, r.keys[i].off)
				}
			}
			l = append(l, r.blocks...)
		}
		if len(l) != a.lists[pool].unmapped.len() {
			t.Fatalf("unmapped list %d counts %d blocks, its runs hold %d", pool, a.lists[pool].unmapped.len(), len(l))
		}
		for i, b := range l {
			if p, ok := unmapped[b]; !ok || p != pool {
				t.Fatalf("unmapped list %d holds a block (%d bytes at %d) that is not an unmapped block of that pool", pool, b.Size, b.off)
			}
			if i > 0 && !keyOf(l[i-1]).before(keyOf(b)) {
				t.Fatalf("unmapped list %d is out of address order at %d", pool, i)
			}
			n++
		}
	}
	if n != len(unmapped) {
		t.Fatalf("unmapped lists hold %d blocks, segments have %d unmapped blocks", n, len(unmapped))
	}
	for list := range a.lists {
		checkIndex(t, &a.lists[list].index, a.lists[list].sizes[:a.lists[list].n])
	}
	whole := 0
	for b := range freeBlocks {
		if releasable(b) {
			if b.wpos < 1 || int(b.wpos) > a.nwhole || a.whole[b.wpos-1] != b.ref {
				t.Fatalf("a releasable free block of %d bytes at %d is missing from the whole list", b.Size, b.off)
			}
			whole++
		} else if b.wpos != 0 {
			t.Fatalf("a free block of %d bytes at %d that is not releasable says it is in the whole list (at %d)", b.Size, b.off, b.wpos-1)
		}
	}
	if whole != a.nwhole {
		t.Fatalf("the whole list holds %d blocks, %d free blocks are releasable", a.nwhole, whole)
	}
}

// checkIndex checks a free list's index against the list's sizes: one
// class per size the list holds, in size order in the tree, each counting
// its blocks, its heap ordered and holding the position of every one.
func checkIndex(t *testing.T, x *freeIndex, sizes []int64) {
	t.Helper()
	checkMid(t, x, sizes)
	if !x.active {
		if x.root != nil || len(x.classes) > 0 {
			t.Fatalf("an inactive index holds %d classes", len(x.classes))
		}
		return
	}
	count := map[int64]int{}
	for _, n := range sizes {
		count[n]++
	}
	var walk func(c *sizeClass, lo, hi int64) int
	walk = func(c *sizeClass, lo, hi int64) int {
		if c == nil {
			return 0
		}
		if c.size <= lo || c.size >= hi || x.classes[c.size] != c {
			t.Fatalf("index class of %d bytes is out of order (%d, %d) or not the map's", c.size, lo, hi)
		}
		if c.n != count[c.size] {
			t.Fatalf("index class of %d bytes counts %d blocks, the list holds %d", c.size, c.n, count[c.size])
		}
		held := map[int32]bool{}
		for i, p := range c.at {
			if i > 0 && c.at[(i-1)/2] > p {
				t.Fatalf("index class of %d bytes: heap out of order at %d", c.size, i)
			}
			held[p] = true
		}
		for p, n := range sizes {
			if n == c.size && !held[int32(p)] {
				t.Fatalf("index class of %d bytes lacks position %d", c.size, p)
			}
		}
		return 1 + walk(c.left, lo, c.size) + walk(c.right, c.size, hi)
	}
	if n := walk(x.root, -1, 1<<62); n != len(count) || n != len(x.classes) {
		t.Fatalf("index holds %d classes in its tree, %d in its map; the list has %d sizes", n, len(x.classes), len(count))
	}
}

// checkMid checks a free list's sizeBuckets against the list's sizes:
// empty unless midOn (never with the classes); else each block's
// position in the bucket of its size, and nothing more, each bucket's
// count its positions', the mask naming the buckets that hold blocks.
func checkMid(t *testing.T, x *freeIndex, sizes []int64) {
	t.Helper()
	s := &x.mid
	entries := 0
	for b := range bucketCount {
		held := 0
		if b < len(s.buckets) {
			k := &s.buckets[b]
			for _, w := range k.set {
				held += bits.OnesCount64(w)
			}
			if held != int(k.n) {
				t.Fatalf("sizeBuckets: bucket %d holds %d positions, counts %d", b, held, k.n)
			}
		}
		entries += held
		if bit := s.full[b/64]&(1<<(b%64)) != 0; (held > 0) != bit {
			t.Fatalf("sizeBuckets: bucket %d holds %d blocks, its bit in the mask is %v", b, held, bit)
		}
	}
	if !x.midOn {
		if entries > 0 || (x.active && x.midOn) {
			t.Fatalf("unused sizeBuckets keep %d entries", entries)
		}
		return
	}
	if x.active {
		t.Fatalf("both the classes and sizeBuckets index the list")
	}
	if entries != len(sizes) {
		t.Fatalf("sizeBuckets holds %d entries, the list %d blocks", entries, len(sizes))
	}
	for p, n := range sizes {
		b := bucketOf(n)
		if b >= len(s.buckets) || p>>6 >= len(s.buckets[b].set) || s.buckets[b].set[p>>6]&(1<<(p&63)) == 0 {
			t.Fatalf("sizeBuckets: the block of %d bytes at position %d is not in bucket %d", n, p, b)
		}
		if p >= len(s.at) || int(s.at[p]) != b {
			t.Fatalf("sizeBuckets: the block of %d bytes at position %d is in bucket %d, its position's bucket is not", n, p, b)
		}
	}
	for b := range s.buckets { // the smallest size of a bucket and its count, while kept
		k := &s.buckets[b]
		if k.nMin == 0 { // its smallest size unknown
			continue
		}
		low, count := int64(math.MaxInt64), 0
		for _, n := range sizes {
			switch {
			case bucketOf(n) != b:
			case n < low:
				low, count = n, 1
			case n == low:
				count++
			}
		}
		if count == 0 || k.min != low || int(k.nMin) != count {
			t.Fatalf("sizeBuckets: bucket %d keeps its smallest block as %d bytes, %d of them; it holds %d of %d bytes", b, k.min, k.nMin, count, low)
		}
	}
}
