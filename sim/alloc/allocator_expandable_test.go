package alloc

import "testing"

// The allocator with and without expandable segments over hand-traced
// sequences (sizes in MiB; a negative entry frees the block of that
// allocation index, counting from 1).
func TestExpandableSegments(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name       string
		limit      int64
		expandable bool
		ops        []int64
		oomAt      int // allocation index (from 1) that does not fit; 0 = none
		reserved   int64
		allocated  int64
	}{
		// Segments of their own: A 40 is freed, C 10 splits its segment
		// (30 left), D 40 needs a segment (80 reserved), E 35 needs 36 more:
		// 116 > 100, and no segment is wholly free to release. (E's block
		// is its whole 36 MiB segment: a 1 MiB rest is not split off.)
		{"slivers pin memory", 100, false, []int64{40, -1, 10, 40, 35}, 4, 116, 86},
		// Expandable: A maps 2 pages (40); C takes [0,10); D runs from the
		// free [10,40) into one new page (60 mapped); E runs from the free
		// [50,60) into 2 new pages: 100 mapped, it fits.
		{"expandable tiles them", 100, true, []int64{40, -1, 10, 40, 35}, 0, 100, 85},
		// X 50 maps 3 pages (60); Y 10 takes the rest; freeing X leaves
		// [0,50) free. Z 70 needs 4 more pages: 140 > 100, so the release
		// unmaps the whole pages [0,40) (20 mapped) and Z maps 4 at the end.
		{"release unmaps free pages", 100, true, []int64{50, 10, -1, 70}, 0, 100, 80},
		// Without: Z releases X's whole segment and gets one of 70.
		{"release frees whole segments", 100, false, []int64{50, 10, -1, 70}, 0, 80, 80},
		// A request past the limit is the OOM either way.
		{"expandable out of memory", 100, true, []int64{60, 50}, 2, 120, 110},
		// Small pool: 2 MiB pages; a 1 MiB request maps one page.
		{"small pool pages", 100, true, []int64{1, 1, 1}, 0, 4, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Allocator{Limit: c.limit * mib, Expandable: c.expandable}
			var blocks []*Block
			n := 0
			for _, op := range c.ops {
				if op < 0 {
					a.Release(blocks[-op-1])
					continue
				}
				n++
				b, ok := a.Alloc(op * mib)
				blocks = append(blocks, b)
				if ok != (n != c.oomAt) {
					t.Errorf("alloc %d (%d MiB): fits %v, want %v", n, op, ok, n != c.oomAt)
				}
			}
			if a.Reserved != c.reserved*mib || a.Allocated != c.allocated*mib {
				t.Errorf("reserved %d MiB, allocated %d MiB; want %d and %d", a.Reserved/mib, a.Allocated/mib, c.reserved, c.allocated)
			}
			var live []*Block
			seen := map[*Block]bool{}
			for _, b := range blocks { // a freed block may be handed out again, or unmapped
				if !b.free && !b.unmapped && !seen[b] {
					live = append(live, b)
					seen[b] = true
				}
			}
			checkAllocator(t, &a, live)
		})
	}
}

// TestPrivatePool: a private pool in use (a CUDA graph tree's) takes
// fixed segments even with expandable segments, and an out-of-memory
// releases none of its cached segments; the OOM records its free blocks.
// Here the pool's 40 MiB block is freed; a 70 MiB compute request (fixed
// segments on the compute stream) over a
// 100 MiB limit releases the compute stream's free 20 MiB segment but not
// the pool's 40.
func TestPrivatePool(t *testing.T) {
	const mib = 1 << 20
	const pool = Stream(4)
	a := Allocator{Limit: 100 * mib, Expandable: true, Private: pool}
	p, _ := a.AllocOn(40*mib, pool)
	if segs := a.Segments(); len(segs) != 1 || segs[0].Expandable || segs[0].Size != 40*mib || segs[0].Stream != pool {
		t.Fatalf("private pool segments %+v, want one fixed 40 MiB segment", segs)
	}
	a.Expandable = false
	c, _ := a.AllocOn(20*mib, DefaultStream)
	a.Release(p)
	a.Release(c)
	if _, ok := a.AllocOn(70*mib, DefaultStream); ok {
		t.Fatal("70 MiB fit beside the pool's cached 40 MiB under a 100 MiB limit")
	}
	if a.FailReserved != 40*mib || a.FailPrivateFree != 40*mib {
		t.Errorf("at the OOM: reserved %d MiB, the pool's free blocks %d MiB; want 40 and 40", a.FailReserved/mib, a.FailPrivateFree/mib)
	}
}
