package alloc

import "testing"

// TestEmptyCache: torch.cuda.empty_cache() gives back every segment that
// holds no allocation and keeps the others whole (a segment with one block
// in use keeps its free rest); the peak starts again from what is
// reserved. Counted by hand: 12, 16 and 40 MiB requests take segments of
// their own size (over 10 MiB, rounded to 2 MiB) unless a cached block
// fits, a 3 MiB request a 20 MiB segment (the second 3 MiB its rest), 512
// B a 2 MiB small one.
func TestEmptyCache(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name     string
		sizes    []int64 // requested in order
		keep     []int   // indices still in use at empty_cache
		reserved int64   // before empty_cache
		after    int64   // after it
	}{
		{"all freed", []int64{12 * MiB, 40 * MiB, 512}, nil, 54 * MiB, 0},
		{"one large kept", []int64{12 * MiB, 40 * MiB, 512}, []int{1}, 54 * MiB, 40 * MiB},
		{"a shared segment kept whole", []int64{3 * MiB, 3 * MiB, 16 * MiB}, []int{0}, 36 * MiB, 20 * MiB},
		{"small pool", []int64{512, 512, 40 * MiB}, []int{1}, 42 * MiB, 2 * MiB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Allocator
			blocks := make([]*Block, len(tc.sizes))
			for i, n := range tc.sizes {
				b, ok := a.Alloc(n)
				if !ok {
					t.Fatalf("request %d failed", i)
				}
				blocks[i] = b
			}
			if a.Reserved != tc.reserved {
				t.Fatalf("reserved %d before empty_cache, want %d", a.Reserved, tc.reserved)
			}
			kept := map[int]bool{}
			for _, i := range tc.keep {
				kept[i] = true
			}
			var inUse int64
			for i, b := range blocks {
				if kept[i] {
					inUse += b.Size
					continue
				}
				a.Release(b)
			}
			a.EmptyCache()
			if a.Reserved != tc.after || a.ReservedOn(DefaultStream) != tc.after {
				t.Errorf("reserved %d (stream %d) after empty_cache, want %d", a.Reserved, a.ReservedOn(DefaultStream), tc.after)
			}
			if a.PeakReservedOn(DefaultStream) != tc.after {
				t.Errorf("peak reserved %d after the reset, want %d", a.PeakReservedOn(DefaultStream), tc.after)
			}
			if a.Allocated != inUse {
				t.Errorf("allocated %d, want the kept blocks' %d", a.Allocated, inUse)
			}
		})
	}
}
