package alloc

// addrList is a free list's unmapped blocks in address order, in runs of
// at most addrRunMax blocks: a block goes in or out by moving the rest of
// its run, not of the whole list, and a search reads the runs' keys
// (segment and offset, kept beside the blocks), not the blocks and their
// segments. Past the
// device's limit, an FSDP2 step of 65,536 layers with expandable segments
// holds ~5,700 holes and adds or removes one ~200,000 times; one sorted
// slice moved half of it each time, and under the race detector each
// move is checked pointer by pointer and each step of a search reads a
// block and its segment (a seventh of such a step's time under -race).
type addrList struct {
	runs []addrRun // each non-empty; run i's blocks all before run i+1's
	n    int
}

// addrRun is a run of blocks and their keys, both in address order.
type addrRun struct {
	blocks []*Block
	keys   []addrKey
}

// addrKey orders blocks by address as unmappedBefore does: segment
// (its index, the creation order), then offset. (A device address, base
// + offset, can pass int64's range: segments of up to 4 EiB each.)
type addrKey struct{ seq, off int64 }

//go:norace
func keyOf(b *Block) addrKey { return addrKey{int64(b.seg), b.off} }

// before reports whether k is at a lower address than o.
//
//go:norace
func (k addrKey) before(o addrKey) bool { return k.seq < o.seq || (k.seq == o.seq && k.off < o.off) }

// addrRunMax is the most blocks a run holds; a fuller one splits in two.
const addrRunMax = 128

// len is the number of blocks listed.
//
//go:norace
func (l *addrList) len() int { return l.n }

// last is the listed block with the highest address, nil when none.
//
//go:norace
func (l *addrList) last() *Block {
	if len(l.runs) == 0 {
		return nil
	}
	r := &l.runs[len(l.runs)-1]
	return r.blocks[len(r.blocks)-1]
}

// find is the run a block of key x belongs in (the first whose last
// key is not before x; the last run when x is after them all) and the
// position in it of the first key not before x.
//
//go:norace
func (l *addrList) find(x addrKey) (k, i int) {
	lo, hi := 0, len(l.runs)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a := l.runs[m].keys; a[len(a)-1].before(x) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	a := l.runs[lo].keys
	i, j := 0, len(a)
	for i < j {
		m := int(uint(i+j) >> 1)
		if a[m].before(x) {
			i = m + 1
		} else {
			j = m
		}
	}
	return lo, i
}

// add lists b.
//
//go:norace
func (l *addrList) add(b *Block) {
	l.n++
	x := keyOf(b)
	if len(l.runs) == 0 {
		l.runs = append(l.runs, addrRun{make([]*Block, 0, addrRunMax), make([]addrKey, 0, addrRunMax)})
	}
	k, i := l.find(x)
	r := &l.runs[k]
	r.blocks = append(r.blocks, nil)
	copy(r.blocks[i+1:], r.blocks[i:])
	r.blocks[i] = b
	r.keys = append(r.keys, addrKey{})
	copy(r.keys[i+1:], r.keys[i:])
	r.keys[i] = x
	if len(r.blocks) <= addrRunMax {
		return
	}
	half := len(r.blocks) / 2 // split: the upper half moves to a new run after it
	upper := addrRun{make([]*Block, len(r.blocks)-half, addrRunMax), make([]addrKey, len(r.blocks)-half, addrRunMax)}
	copy(upper.blocks, r.blocks[half:])
	copy(upper.keys, r.keys[half:])
	clear(r.blocks[half:])
	r.blocks, r.keys = r.blocks[:half], r.keys[:half]
	l.runs = append(l.runs, addrRun{})
	copy(l.runs[k+2:], l.runs[k+1:])
	l.runs[k+1] = upper
}

// at returns where b is listed, ok false when it is not.
//
//go:norace
func (l *addrList) at(b *Block) (k, i int, ok bool) {
	if len(l.runs) == 0 {
		return 0, 0, false
	}
	k, i = l.find(keyOf(b))
	return k, i, i < len(l.runs[k].blocks) && l.runs[k].blocks[i] == b
}

// remove takes b off the list, when listed.
//
//go:norace
func (l *addrList) remove(b *Block) {
	k, i, ok := l.at(b)
	if !ok {
		return
	}
	l.n--
	r := &l.runs[k]
	copy(r.blocks[i:], r.blocks[i+1:])
	r.blocks[len(r.blocks)-1] = nil
	r.blocks = r.blocks[:len(r.blocks)-1]
	copy(r.keys[i:], r.keys[i+1:])
	r.keys = r.keys[:len(r.keys)-1]
	if len(r.blocks) > 0 {
		return
	}
	copy(l.runs[k:], l.runs[k+1:])
	l.runs[len(l.runs)-1] = addrRun{}
	l.runs = l.runs[:len(l.runs)-1]
}

// replace lists b where old was, old taken off: b must sit between old's
// neighbours in address order (the rest of old after its start was cut
// off, or old's predecessor merged with it). When old is not listed, b is
// added.
//
//go:norace
func (l *addrList) replace(old, b *Block) {
	k, i, ok := l.at(old)
	if !ok {
		l.add(b)
		return
	}
	l.runs[k].blocks[i], l.runs[k].keys[i] = b, keyOf(b)
}
