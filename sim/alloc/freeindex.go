package alloc

// freeIndex finds the allocator's best-fit free block in O(log n) instead
// of a scan of the pool's free list, which made the replay quadratic in
// the number of cached blocks (a 4,000-layer GPT-2 replayed for 12 s, a
// 10,000-layer one for minutes).
//
// It keeps the pool's free blocks ordered by (size, position in the free
// list), so its first block of size >= n is exactly the block the scan
// picked: the smallest size that fits, and among blocks of that size the
// first in list order. The free list itself stays as it was (append, and
// removal by moving the last block into the hole), so every choice, and
// every number in a report, is unchanged; the allocator fuzz test checks
// the index against the scan.
//
// The index is a treap (a binary search tree kept balanced by random
// heap priorities); the priorities come from a counter, so runs are
// deterministic. A short free list (the usual case: a 70B plan's stays
// short) is faster to scan than to index, so the index is built only
// while the list is longer than indexAbove blocks.
type freeIndex struct {
	root   *freeNode
	spare  *freeNode  // removed nodes, linked by right, for the next inserts
	nodes  []freeNode // new nodes, carved a slab at a time (slab.go)
	seed   uint64
	active bool
	above  int // 0: indexAbove (tests lower it to exercise the index)
}

// indexAbove is the free-list length from which the index pays: a 70B
// plan's lists stay under it (BenchmarkEvaluateLlama70B is unchanged), a
// 10,000-layer GPT-2's grow far past it. The index is dropped below a
// quarter of it.
const indexAbove = 1024

func (x *freeIndex) limit() int {
	if x.above > 0 {
		return x.above
	}
	return indexAbove
}

type freeNode struct {
	b           *Block
	size        int64
	pos         int
	prio        uint64
	left, right *freeNode
}

// before orders nodes by (size, pos).
func (n *freeNode) before(size int64, pos int) bool {
	return n.size < size || (n.size == size && n.pos < pos)
}

// split returns the nodes before (size, pos) and the rest.
func splitFree(t *freeNode, size int64, pos int) (l, r *freeNode) {
	if t == nil {
		return nil, nil
	}
	if t.before(size, pos) {
		t.right, r = splitFree(t.right, size, pos)
		return t, r
	}
	l, t.left = splitFree(t.left, size, pos)
	return l, t
}

// mergeFree joins l and r, every node of l before every node of r.
func mergeFree(l, r *freeNode) *freeNode {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = mergeFree(l.right, r)
		return l
	}
	r.left = mergeFree(l, r.left)
	return r
}

// insert adds b, at position pos of its free list. It reuses a removed
// node: a replay inserts and removes millions (a node allocated for each
// was a third of a 10,000-layer replay's allocations, and most of its
// time under the race detector).
func (x *freeIndex) insert(b *Block, pos int) {
	x.seed = x.seed*6364136223846793005 + 1442695040888963407 // PCG's LCG step
	n := x.spare
	if n != nil {
		x.spare = n.right
	} else {
		if len(x.nodes) == 0 {
			x.nodes = make([]freeNode, min(max(2*cap(x.nodes), slabMin), slabMax))
		}
		n, x.nodes = &x.nodes[0], x.nodes[1:]
	}
	*n = freeNode{b: b, size: b.Size, pos: pos, prio: x.seed ^ x.seed>>29}
	l, r := splitFree(x.root, n.size, n.pos)
	x.root = mergeFree(mergeFree(l, n), r)
}

// remove deletes the node of size at pos, keeping it for reuse.
func (x *freeIndex) remove(size int64, pos int) {
	var n *freeNode
	x.root, n = deleteFree(x.root, size, pos)
	if n != nil {
		*n = freeNode{right: x.spare}
		x.spare = n
	}
}

// deleteFree takes the node at (size, pos) out of t, in one descent, and
// returns t without it and the node (nil when there is none).
func deleteFree(t *freeNode, size int64, pos int) (root, n *freeNode) {
	switch {
	case t == nil:
		return nil, nil
	case t.size == size && t.pos == pos:
		return mergeFree(t.left, t.right), t
	case t.before(size, pos):
		t.right, n = deleteFree(t.right, size, pos)
	default:
		t.left, n = deleteFree(t.left, size, pos)
	}
	return t, n
}

// find returns the node at (size, pos), or nil.
func (x *freeIndex) find(size int64, pos int) *freeNode {
	t := x.root
	for t != nil && (t.size != size || t.pos != pos) {
		if t.before(size, pos) {
			t = t.right
		} else {
			t = t.left
		}
	}
	return t
}

// bestFit returns the first block of size >= n, or nil.
func (x *freeIndex) bestFit(n int64) *Block {
	var best *freeNode
	for t := x.root; t != nil; {
		if t.size >= n {
			best, t = t, t.left
		} else {
			t = t.right
		}
	}
	if best == nil {
		return nil
	}
	return best.b
}

// largest is the size of the largest block in the index.
func (x *freeIndex) largest() int64 {
	t := x.root
	if t == nil {
		return 0
	}
	for t.right != nil {
		t = t.right
	}
	return t.size
}

// added keeps the index in step after b was appended to the free list fl.
func (x *freeIndex) added(b *Block, fl []*Block) {
	switch {
	case x.active:
		x.insert(b, b.pos)
	case len(fl) > x.limit():
		for i, c := range fl {
			x.insert(c, i)
		}
		x.active = true
	}
}

// removed keeps the index in step after b left the free list, the list's
// last block moving from position from into b's position (moved is nil
// when b was the last); fl is the list afterwards.
func (x *freeIndex) removed(b *Block, moved *Block, from int, fl []*Block) {
	if !x.active {
		return
	}
	if len(fl) < x.limit()/4 {
		x.root, x.active = nil, false
		return
	}
	if moved != nil && moved.Size == b.Size {
		// moved takes b's place in the order, (size, b.pos), as in the list.
		x.remove(moved.Size, from)
		x.find(b.Size, b.pos).b = moved
		return
	}
	x.remove(b.Size, b.pos)
	if moved != nil {
		x.remove(moved.Size, from)
		x.insert(moved, moved.pos)
	}
}

// best returns the first block in list order of the smallest size >= n,
// from the index or by scanning the list's sizes (sizes[i] is fl[i]'s).
func (x *freeIndex) best(n int64, fl []*Block, sizes []int64) *Block {
	if x.active {
		return x.bestFit(n)
	}
	best := -1
	for i, s := range sizes {
		if s >= n && (best < 0 || s < sizes[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return fl[best]
}
