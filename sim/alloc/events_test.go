package alloc

import "testing"

// TestSegmentEvents checks that the observer sees every change of reserved
// memory, so a device trace replays to the allocator's own figures, and
// that blocks have addresses inside their segments.
func TestSegmentEvents(t *testing.T) {
	for _, expandable := range []bool{false, true} {
		var reserved int64
		var kinds []string
		a := &Allocator{Limit: 64 << 20, Expandable: expandable}
		a.Observe = func(e SegmentEvent) {
			kinds = append(kinds, e.Kind)
			switch e.Kind {
			case SegmentAlloc, SegmentMap:
				reserved += e.Size
			case SegmentFree, SegmentUnmap:
				reserved -= e.Size
			}
		}
		var blocks []*Block
		for _, n := range []int64{4 << 20, 12 << 20, 600, 30 << 20} {
			b, ok := a.Alloc(n)
			if !ok {
				t.Fatalf("expandable=%v: %d B did not fit", expandable, n)
			}
			blocks = append(blocks, b)
			if reserved != a.Reserved {
				t.Fatalf("expandable=%v: events add to %d, allocator reserves %d", expandable, reserved, a.Reserved)
			}
		}
		seen := map[int64]bool{}
		for _, b := range blocks {
			if a.Addr(b) < baseAddress || seen[a.Addr(b)] {
				t.Errorf("expandable=%v: block address %#x reused or below the base", expandable, a.Addr(b))
			}
			seen[a.Addr(b)] = true
		}
		a.Release(blocks[0])
		a.Release(blocks[3])
		// A request past the limit releases the cached segments (or pages) first.
		a.Alloc(40 << 20)
		if reserved != a.Reserved {
			t.Errorf("expandable=%v: after the release, events add to %d, allocator reserves %d (%v)", expandable, reserved, a.Reserved, kinds)
		}
		var inUse, total int64
		for _, s := range a.Segments() {
			total += s.Size
			for _, b := range s.Blocks {
				// An expandable segment's mapped pages may lie anywhere in its
				// address space; a plain segment's blocks tile it.
				if b.Addr < s.Addr || (!s.Expandable && b.Addr+b.Size > s.Addr+s.Size) {
					t.Errorf("block %#x+%d outside segment %#x", b.Addr, b.Size, s.Addr)
				}
				if b.InUse {
					inUse += b.Size
				}
			}
		}
		if inUse != a.Allocated || total != a.Reserved {
			t.Errorf("expandable=%v: Segments() holds %d in use of %d, allocator %d of %d", expandable, inUse, total, a.Allocated, a.Reserved)
		}
	}
}
