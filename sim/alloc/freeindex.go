package alloc

// freeIndex finds the allocator's best-fit free block in O(log n) instead
// of a scan of the pool's free list, which made the replay quadratic in
// the number of cached blocks (a 4,000-layer GPT-2 replayed for 12 s, a
// 10,000-layer one for minutes).
//
// It keeps the pool's free blocks by size class: the classes, one per
// size some free block has, ordered by size, and in each class the
// positions in the free list of its blocks, the first on top. Its pick,
// the class of the smallest size >= n and that class's first position, is
// exactly the block the scan picked: the smallest size that fits, and
// among blocks of that size the first in list order. The free list itself
// stays as it was (append, and removal by moving the last block into the
// hole), so every choice, and every number in a report, is unchanged; the
// allocator fuzz test checks the index against the scan.
//
// Blocks of one size are many where a step repeats a block: a 65,536-layer
// step past the device's limit leaves about 300,000 free tails of its
// weights' segments, of 4 sizes (the FuzzSizes repeat_65536 seeds). An
// index by (size, position) held a node per block, and each free or
// allocation cut and joined a tree as deep as 40; by class, it touches
// one class, and a class's positions are a binary heap of int32s.
//
// The classes are a treap (a binary search tree kept balanced by random
// heap priorities); the priorities come from a counter, so runs are
// deterministic. A class's heap is lazy: a block that leaves the list, or
// moves into a hole, leaves its old position behind, and the top is
// checked against the list's sizes (a stale position is past the list's
// end or holds a block of another size) and dropped when stale; a heap
// grown past twice its class's blocks is rebuilt. A shorter free list
// (the usual case: a 70B plan's stays under a few hundred blocks) is
// cheaper to keep in buckets by size (sizeBuckets, from 64 blocks on) or,
// under 64, to scan, so the classes are built only while the list is
// longer than indexAbove blocks.
type freeIndex struct {
	root    *sizeClass // the classes, by size
	classes map[int64]*sizeClass
	last    *sizeClass // the class used last (a repeated step frees and takes blocks of one size in a row)
	spare   *sizeClass // emptied classes, linked by right, for the next ones
	seed    uint64
	active  bool
	above   int           // 0: indexAbove (tests lower it to exercise the index)
	seen    positionMarks // a rebuild's marks (sizeClass.rebuild)
	// mid is the list in buckets by size while it is of middling length
	// (midOn: longer than a sixteenth of limit, until shorter than a
	// sixty-fourth; not active).
	mid   sizeBuckets
	midOn bool
}

// indexAbove is the free-list length from which the index pays: a 70B
// plan's lists stay under it (BenchmarkEvaluateLlama70B is unchanged), a
// 10,000-layer GPT-2's grow far past it. The index is dropped below a
// quarter of it.
const indexAbove = 1024

//go:norace
func (x *freeIndex) limit() int {
	if x.above > 0 {
		return x.above
	}
	return indexAbove
}

// sizeClass is the free blocks of one size.
type sizeClass struct {
	size int64
	n    int     // blocks of this size in the free list
	at   []int32 // a min-heap of positions: each block of the class is at one, some are stale
	prio uint64
	// left, right: the treap's children (right links the spare classes)
	left, right *sizeClass
}

// splitClasses returns the classes of t smaller than size and the rest.
//
//go:norace
func splitClasses(t *sizeClass, size int64) (l, r *sizeClass) {
	if t == nil {
		return nil, nil
	}
	if t.size < size {
		t.right, r = splitClasses(t.right, size)
		return t, r
	}
	l, t.left = splitClasses(t.left, size)
	return l, t
}

// mergeClasses joins l and r, every class of l smaller than every class of r.
//
//go:norace
func mergeClasses(l, r *sizeClass) *sizeClass {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = mergeClasses(l.right, r)
		return l
	}
	r.left = mergeClasses(l, r.left)
	return r
}

// deleteClass takes the class of size out of t and returns t without it.
//
//go:norace
func deleteClass(t *sizeClass, size int64) *sizeClass {
	switch {
	case t == nil:
		return nil
	case t.size == size:
		return mergeClasses(t.left, t.right)
	case t.size < size:
		t.right = deleteClass(t.right, size)
	default:
		t.left = deleteClass(t.left, size)
	}
	return t
}

// class returns the class of size, made (and put in the tree) when no
// block has that size.
//
//go:norace
func (x *freeIndex) class(size int64) *sizeClass {
	if c := x.last; c != nil && c.size == size {
		return c
	}
	if c := x.classes[size]; c != nil {
		x.last = c
		return c
	}
	if x.classes == nil {
		x.classes = map[int64]*sizeClass{}
	}
	x.seed = x.seed*6364136223846793005 + 1442695040888963407 // PCG's LCG step
	c := x.spare
	if c != nil {
		x.spare = c.right
		*c = sizeClass{at: c.at[:0]}
	} else {
		c = new(sizeClass)
	}
	c.size, c.prio = size, x.seed^x.seed>>29
	l, r := splitClasses(x.root, size)
	x.root = mergeClasses(mergeClasses(l, c), r)
	x.classes[size], x.last = c, c
	return c
}

// add counts a block of size at position pos of the free list (sizes:
// the list's sizes).
//
//go:norace
func (x *freeIndex) add(size int64, pos int, sizes []int64) {
	c := x.class(size)
	c.n++
	c.push(int32(pos), sizes, &x.seen)
}

// drop uncounts a block of size that left the free list.
//
//go:norace
func (x *freeIndex) drop(size int64) {
	c := x.class(size)
	if c.n--; c.n > 0 {
		return
	}
	x.root = deleteClass(x.root, size)
	delete(x.classes, size)
	c.left, c.right, x.spare, x.last = nil, x.spare, c, nil
}

// stale reports whether position p holds no block of the class.
//
//go:norace
func (c *sizeClass) stale(p int32, sizes []int64) bool {
	return int(p) >= len(sizes) || sizes[p] != c.size
}

// first returns the class's first position in the free list, dropping
// stale positions off the top.
//
//go:norace
func (c *sizeClass) first(sizes []int64) int32 {
	for c.stale(c.at[0], sizes) {
		c.pop()
	}
	return c.at[0]
}

// push adds position p to the heap, which is rebuilt when it has grown
// past twice the class's blocks.
//
//go:norace
func (c *sizeClass) push(p int32, sizes []int64, seen *positionMarks) {
	h := append(c.at, p)
	i := len(h) - 1
	for i > 0 {
		up := (i - 1) / 2
		if h[up] <= p {
			break
		}
		h[i], i = h[up], up
	}
	h[i] = p
	c.at = h
	if len(h) > 2*c.n+16 {
		c.rebuild(sizes, seen)
	}
}

// rebuild keeps one entry per block of the class, its position, and
// makes the entries a heap again. Repeated positions are found by marking
// the positions seen, not by sorting them (the sort was most of a
// rebuild's work, and under the race detector each comparison is checked
// reads); the heap's layout is not a sorted list's, its top is the same.
//
//go:norace
func (c *sizeClass) rebuild(sizes []int64, seen *positionMarks) {
	seen.reset(len(sizes))
	kept := c.at[:0]
	for _, p := range c.at {
		if !c.stale(p, sizes) && seen.mark(p) {
			kept = append(kept, p)
		}
	}
	c.at = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		siftDown(kept, i, kept[i])
	}
}

// positionMarks marks free-list positions, for one rebuild at a time: a
// position is marked when it holds the current generation.
type positionMarks struct {
	at  []uint32
	gen uint32
}

// reset unmarks every position below n.
//
//go:norace
func (m *positionMarks) reset(n int) {
	if len(m.at) < n {
		m.at = append(m.at, make([]uint32, n-len(m.at))...)
	}
	if m.gen++; m.gen == 0 { // wrapped: old marks could pass for new ones
		clear(m.at)
		m.gen = 1
	}
}

// mark marks position p and says whether it was unmarked.
//
//go:norace
func (m *positionMarks) mark(p int32) bool {
	if m.at[p] == m.gen {
		return false
	}
	m.at[p] = m.gen
	return true
}

// pop removes the heap's top.
//
//go:norace
func (c *sizeClass) pop() {
	h := c.at
	last := h[len(h)-1]
	h = h[:len(h)-1]
	c.at = h
	if len(h) == 0 {
		return
	}
	siftDown(h, 0, last)
}

// siftDown puts v at position i of the heap h and moves it down to its
// place.
//
//go:norace
func siftDown(h []int32, i int, v int32) {
	for {
		k := 2*i + 1
		if k >= len(h) {
			break
		}
		if k+1 < len(h) && h[k+1] < h[k] {
			k++
		}
		if v <= h[k] {
			break
		}
		h[i], i = h[k], k
	}
	h[i] = v
}

// bestFit returns the position of the first block in list order of the
// smallest size >= n, or -1.
//
//go:norace
func (x *freeIndex) bestFit(n int64, sizes []int64) int {
	var best *sizeClass
	for t := x.root; t != nil; {
		if t.size >= n {
			best, t = t, t.left
		} else {
			t = t.right
		}
	}
	if best == nil {
		return -1
	}
	return int(best.first(sizes))
}

// largest is the size of the largest block in the index and how many
// blocks have it.
//
//go:norace
func (x *freeIndex) largest() (int64, int) {
	t := x.root
	if t == nil {
		return 0, 0
	}
	for t.right != nil {
		t = t.right
	}
	return t.size, t.n
}

// added keeps the index in step after a block of size was appended to
// the free list at pos (sizes: the list's sizes).
//
//go:norace
func (x *freeIndex) added(size int64, pos int, sizes []int64) {
	switch {
	case x.active:
		x.add(size, pos, sizes)
	case len(sizes) > x.limit():
		for i, c := range sizes {
			x.add(c, i, sizes)
		}
		x.active = true
		if x.midOn {
			x.mid.reset()
			x.midOn = false
		}
	case x.midOn:
		x.mid.add(size, pos)
	case len(sizes) > x.limit()/16:
		x.mid.rebuild(sizes)
		x.midOn = true
	}
}

// removed keeps the index in step after a block of size left the free
// list, the list's last block, of movedSize, moving into its position
// movedTo (-1 when it was the last); sizes is the list's sizes afterwards.
//
//go:norace
func (x *freeIndex) removed(size int64, movedTo int, movedSize int64, sizes []int64) {
	if !x.active {
		switch from := len(sizes); { // from: the position the list's last block left
		case !x.midOn:
		case from < x.limit()/64:
			x.mid.reset()
			x.midOn = false
		case movedTo < 0:
			x.mid.remove(size, from, size, from)
		default:
			x.mid.remove(size, movedTo, movedSize, from)
		}
		return
	}
	if len(sizes) < x.limit()/4 {
		*x = freeIndex{seed: x.seed, above: x.above, seen: x.seen, mid: x.mid}
		if len(sizes) > x.limit()/16 {
			x.mid.rebuild(sizes)
			x.midOn = true
		}
		return
	}
	x.drop(size)
	if movedTo >= 0 && movedSize != size {
		// The moved block's old position is stale now, and the hole's is
		// new to its class. (When they are of one size, the hole's
		// position stays in the class: it holds the moved block now.)
		x.class(movedSize).push(int32(movedTo), sizes, &x.seen)
	}
}

// best returns the position of the first block in list order of the
// smallest size >= n, or -1, from the index or by scanning the list's
// sizes (sizes[i] is position i's).
//
//go:norace
func (x *freeIndex) best(n int64, sizes []int64) int {
	switch {
	case x.active:
		return x.bestFit(n, sizes)
	case x.midOn:
		return x.mid.best(n, sizes)
	}
	return scanSizes(n, sizes)
}

// scanSizes returns the position of the first of the smallest sizes
// >= n, or -1. Sizes and n are positive, so s-n read unsigned is the
// room a fitting size leaves (below 1<<63) and, for a size too small,
// at least 1<<63: one unsigned comparison per size says whether it fits
// better than the best so far. Four sizes none of which fits better are
// passed over at once. The strict < keeps the first of equal sizes; a
// size equal to n cannot be beaten. The scan was a quarter of
// BenchmarkEvaluateLlama70B3D's instructions (lists of 32 to 300 blocks);
// about 8 instructions a size before, 5.5 now (750 M -> 697 M in all).
//
//go:norace
func scanSizes(n int64, sizes []int64) int {
	best, room := -1, uint64(1)<<63
	for i := 0; i < len(sizes); i++ {
		for ; i+4 <= len(sizes); i += 4 {
			s := (*[4]int64)(sizes[i:])
			if uint64(s[0]-n) < room || uint64(s[1]-n) < room || uint64(s[2]-n) < room || uint64(s[3]-n) < room {
				break
			}
		}
		if i == len(sizes) {
			break
		}
		if r := uint64(sizes[i] - n); r < room {
			if r == 0 {
				return i
			}
			best, room = i, r
		}
	}
	return best
}
