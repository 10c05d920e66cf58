package alloc

import (
	"slices"
	"testing"
)

// TestAddrList adds blocks of two segments to an addrList in a scrambled
// order, takes some out again and replaces some by a block just after
// them (the rest of an unmapped block mapped at its start), past several
// splits of its runs: after each step the list must hold exactly the
// blocks a sorted slice holds, in address order, with last the highest.
func TestAddrList(t *testing.T) {
	const n = 3000 // over 20 runs of addrRunMax
	blocks := make([]*Block, n)
	for i := range blocks {
		blocks[i] = &Block{seg: int32(i % 2), off: int64(i/2) << 20}
	}
	seed := uint64(7)
	next := func(k int) int { // a fixed pseudo-random sequence (an LCG)
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % k
	}
	var l addrList
	var want []*Block
	in := map[*Block]bool{}
	for step := range 4 * n {
		b := blocks[next(n)]
		switch {
		case step%5 == 4 && in[b]: // b's rest, 512 B on: between b and the next block
			rest := &Block{seg: b.seg, off: b.off + 512}
			l.replace(b, rest)
			want[slices.Index(want, b)] = rest
			in[b], in[rest] = false, true
			blocks[slices.Index(blocks, b)] = rest
		case step%3 == 2 && in[b]:
			l.remove(b)
			want = slices.DeleteFunc(want, func(x *Block) bool { return x == b })
			in[b] = false
		case !in[b]:
			l.add(b)
			want = append(want, b)
			in[b] = true
		default:
			continue
		}
		if step%97 != 0 && step != 4*n-1 {
			continue
		}
		slices.SortFunc(want, func(x, y *Block) int {
			if keyOf(x).before(keyOf(y)) {
				return -1
			}
			return 1
		})
		var got []*Block
		for _, r := range l.runs {
			if len(r.blocks) == 0 || len(r.blocks) > addrRunMax || len(r.keys) != len(r.blocks) {
				t.Fatalf("step %d: a run of %d blocks and %d keys (1 to %d)", step, len(r.blocks), len(r.keys), addrRunMax)
			}
			for i, b := range r.blocks {
				if r.keys[i] != keyOf(b) {
					t.Fatalf("step %d: a block listed with another's key", step)
				}
			}
			got = append(got, r.blocks...)
		}
		if !slices.Equal(got, want) || l.len() != len(want) {
			t.Fatalf("step %d: the list holds %d blocks (counted %d), want %d in address order", step, len(got), l.len(), len(want))
		}
		if len(want) > 0 && l.last() != want[len(want)-1] {
			t.Fatalf("step %d: last is not the highest block", step)
		}
	}
	if len(l.runs) < 10 {
		t.Fatalf("%d runs at the end: the test should split runs many times", len(l.runs))
	}
	l.remove(&Block{seg: 0, off: 1}) // not listed: nothing happens
	if l.len() != len(want) {
		t.Fatalf("removing a block not listed changed the count")
	}
}
