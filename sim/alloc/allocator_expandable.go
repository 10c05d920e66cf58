package alloc

import "github.com/memsh/memsh/sim/units"

// Expandable segments: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
// (Note [Expandable Segments] in c10/cuda/CUDACachingAllocator.cpp).
//
// Each pool gets one segment of virtual address space (9/8 of the device's
// memory) in which physical pages are mapped as the program needs them:
// 2 MiB pages for the small pool, 20 MiB pages for the large one. What
// changes against cudaMalloc'd segments:
//
//   - a request no free block fits maps new pages at the lowest address
//     where a run of free and unmapped blocks is long enough (usually the
//     end of the mapped range), instead of making a segment of its own;
//   - blocks split whenever at least 512 B would remain, in both pools
//     (should_split);
//   - when the device is full, release_cached_blocks unmaps every whole
//     page inside free blocks (unmap_block), so the slivers left at the
//     ends of segments no longer pin memory, and the request is retried.
//
// Reserved memory is the mapped bytes. Unmapped blocks are never free
// (they are not in the free lists) and never merge with free blocks.

// pageSize is the mapping granularity of an expandable segment.
//
//go:norace
func pageSize(pool int) int64 {
	if pool == 0 {
		return smallBuffer // 2 MiB pages for the small pool
	}
	return largeBuffer // 20 MiB pages for the large pool
}

//go:norace
func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// allocExpandable is alloc with expandable segments: each stream has its
// own segment per pool.
//
//go:norace
func (a *Allocator) allocExpandable(n int64, s Stream) (blk *Block, ok bool) {
	size := RoundSize(n)
	pool := listOf(s, poolOf(size))
	ok = true
	b := a.bestFit(pool, size)
	if b == nil {
		a.grew(pool, size)
		b = a.expand(pool, size, true)
	}
	if b == nil {
		a.retried()
		a.releaseCached(s)
		b = a.expand(pool, size, true)
	}
	if b == nil {
		// Out of memory: the first such request is the OOM; the replay
		// goes on with the pages granted past the limit.
		ok = false
		if !a.over {
			a.failed()
			a.over = true
		}
		b = a.expand(pool, size, false)
	}
	a.removeFree(b) // a free block that held it already; mapped pages are not listed
	if b.Size-size >= minBlock {
		a.addFree(a.splitAt(b, size))
	}
	b.free = false
	a.Allocated += b.Size
	a.allocatedOn(b.stream, b.Size)
	return b, ok
}

// expand maps pages for a request of size bytes in free list pool (a
// stream's small or large pool: try_allocate_expandable_block) and returns
// the free block that holds it, not in the free list when it holds new
// pages (the caller takes it at once: listing it and taking it off again
// changed nothing but made Cached scan for the largest block again, at
// every request past the limit); nil when the pages do not fit under
// the limit (enforced only when limit is set), the pages mapped so far
// listed as free.
//
//go:norace
func (a *Allocator) expand(pool int, size int64, limited bool) *Block {
	c := a.findExpandable(pool, size)
	if c.unmapped {
		if c = a.mapBlock(c, min(c.Size, size), limited); c == nil {
			return nil
		}
	}
	for c.Size < size {
		next := a.at(c.next) // free -> unmapped: map some of it, merging into c
		m := a.mapBlock(next, min(size-c.Size, next.Size), limited)
		if m == nil {
			if !a.listed(c) {
				a.addFree(c)
			}
			return nil
		}
		c = m
	}
	return c
}

// findExpandable returns the lowest-address block that starts a run of
// free and unmapped blocks of at least size bytes, beginning at an
// unmapped block or the free block just before one (find_expandable_block).
// With none, it opens a new segment of virtual address space.
//
// Past the limit (after the OOM, when the replay goes on to report what
// the step would need) it looks only at the end of the newest segment:
// the holes that releases leave are what made a scan quadratic there (a
// 65,536-layer step replayed for minutes); where the pages go then changes
// reserved memory by page rounding only (20 MiB in 149 GiB for the Bris
// example's 4 members).
//
//go:norace
func (a *Allocator) findExpandable(pool int, size int64) *Block {
	holes := &a.lists[a.grow(pool)].unmapped
	if a.over && holes.len() > 0 {
		if c := a.runFrom(holes.last(), size); c != nil { // the newest segment's end
			return c
		}
	} else {
		for _, run := range holes.runs {
			for _, u := range run.blocks {
				if c := a.runFrom(u, size); c != nil {
					return c
				}
			}
		}
	}
	page := pageSize(pool % 2)
	space := a.Limit + a.Limit/8 // 9/8 of the device: ExpandableSegment's address space
	if a.Limit <= 0 || space > units.MaxBytes {
		space = 1 << 40 // no device limit: any large space will do
	}
	virtual := roundUp(max(space, size), page)
	b := a.newSegment(virtual, pool%2, Stream(pool/2), true)
	a.addUnmapped(b)
	return b
}

// runFrom returns the block that starts a run of free and unmapped
// blocks of at least size bytes at the unmapped block u (its free
// predecessor, or u), nil when the run is shorter.
//
//go:norace
func (a *Allocator) runFrom(u *Block, size int64) *Block {
	c := u
	if u.prev != 0 && a.at(u.prev).free {
		c = a.at(u.prev)
	}
	var room int64
	for b := c; room < size && (b.free || b.unmapped); b = a.at(b.next) {
		room += b.Size
		if b.next == 0 {
			break
		}
	}
	if room >= size {
		return c
	}
	return nil
}

// mapBlock maps want bytes (rounded up to whole pages) at the start of the
// unmapped block u, merges them with free neighbours and returns the
// merged free block, which it does not list (expand); nil when the pages
// do not fit under the limit.
//
//go:norace
func (a *Allocator) mapBlock(u *Block, want int64, limited bool) *Block {
	pages := min(roundUp(want, pageSize(int(u.pool))), u.Size)
	if limited && a.Limit > 0 && a.Reserved+pages > a.Limit {
		return nil
	}
	if pages < u.Size { // the rest stays unmapped, listed where u was
		a.lists[a.grow(u.list())].unmapped.replace(u, a.splitAt(u, pages))
	} else {
		a.removeUnmapped(u)
	}
	u.unmapped = false
	a.Reserved += pages
	a.observe(SegmentMap, u.stream, a.Addr(u), pages)
	// The new pages join free neighbours, as release merges a freed block.
	b := a.joinFree(u)
	b.free = true
	return b
}

// unmapBlock unmaps the whole pages inside the free block b (unmap_block,
// from releaseCached); the partial pages at its ends stay mapped and free.
//
//go:norace
func (a *Allocator) unmapBlock(b *Block) {
	page := pageSize(int(b.pool))
	begin, end := roundUp(b.off, page), (b.off+b.Size)/page*page
	if begin >= end {
		return
	}
	a.removeFree(b)
	if end < b.off+b.Size { // the partial page after stays mapped and free
		a.addFree(a.splitAt(b, end-b.off))
	}
	if begin > b.off { // and so does the partial page before
		u := a.splitAt(b, begin-b.off)
		a.addFree(b)
		b = u
	}
	b.free, b.unmapped = false, true
	a.Reserved -= b.Size
	a.observe(SegmentUnmap, b.stream, a.Addr(b), b.Size)
	// Join unmapped neighbours. The list keeps the merged block where the
	// first of them was: the block before, listed already, or b in the
	// place of the block after.
	l := &a.lists[a.grow(b.list())].unmapped
	var p, n *Block
	if b.prev != 0 {
		p = a.at(b.prev)
	}
	if b.next != 0 {
		n = a.at(b.next)
	}
	before, after := p != nil && p.unmapped, n != nil && n.unmapped
	switch {
	case before && after:
		l.remove(n)
	case after:
		l.replace(n, b)
	case !before:
		l.add(b)
	}
	if after {
		a.mergeNext(b)
	}
	if before {
		a.mergeNext(p)
	}
}

//go:norace
func (a *Allocator) addUnmapped(b *Block) { a.lists[a.grow(b.list())].unmapped.add(b) }

//go:norace
func (a *Allocator) removeUnmapped(b *Block) { a.lists[a.grow(b.list())].unmapped.remove(b) }
