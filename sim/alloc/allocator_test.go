package alloc

import "testing"

func TestRoundAndSegmentSizes(t *testing.T) {
	cases := []struct {
		req, rounded, segment int64
	}{
		{1, 512, 2 << 20},
		{512, 512, 2 << 20},
		{513, 1024, 2 << 20},
		{1 << 20, 1 << 20, 2 << 20},                        // largest small-pool request
		{1<<20 + 1, 1<<20 + 512, 20 << 20},                 // large pool, under 10 MiB: 20 MiB segment
		{10 << 20, 10 << 20, 10 << 20},                     // 10 MiB: rounded to 2 MiB multiple
		{11_135_229_952, 11_135_229_952, 5310 * (2 << 20)}, // the Bris tensor: 5,310 segments of 2 MiB
	}
	for _, c := range cases {
		if got := RoundSize(c.req); got != c.rounded {
			t.Errorf("roundSize(%d) = %d, want %d", c.req, got, c.rounded)
		}
		if got := segmentSize(RoundSize(c.req)); got != c.segment {
			t.Errorf("segmentSize(%d) = %d, want %d", c.req, got, c.segment)
		}
	}
}

func TestAllocatorCachesAndSplits(t *testing.T) {
	var a Allocator
	x, _ := a.Alloc(3 << 20) // 20 MiB segment, split: 3 MiB used, 17 MiB free
	if a.Reserved != 20<<20 || a.Allocated != 3<<20 {
		t.Fatalf("after 3 MiB: reserved %d allocated %d", a.Reserved, a.Allocated)
	}
	y, _ := a.Alloc(5 << 20) // fits in the 17 MiB remainder: no new segment
	if a.Reserved != 20<<20 {
		t.Fatalf("5 MiB should reuse the cached remainder, reserved %d", a.Reserved)
	}
	a.Release(x)
	a.Release(y)
	if a.Allocated != 0 || a.Reserved != 20<<20 {
		t.Fatalf("after frees: allocated %d reserved %d (cached segments stay reserved)", a.Allocated, a.Reserved)
	}
	if l := &a.lists[1]; l.n != 1 || a.at(l.blocks[0]).Size != 20<<20 {
		t.Fatalf("freed blocks must merge back into one 20 MiB block, got %d blocks", l.n)
	}
	// A small request never comes from the large pool.
	a.Alloc(4096)
	if a.Reserved != 22<<20 {
		t.Fatalf("small request must open a 2 MiB small-pool segment, reserved %d", a.Reserved)
	}
}

func TestAllocatorFragmentationAndOOM(t *testing.T) {
	a := Allocator{Limit: 64 << 20}
	b1, ok1 := a.Alloc(30 << 20)
	b2, ok2 := a.Alloc(30 << 20)
	if !ok1 || !ok2 || a.Reserved != 60<<20 {
		t.Fatalf("two 30 MiB blocks must fit under 64 MiB: reserved %d", a.Reserved)
	}
	a.Release(b1)
	// 32 MiB does not fit the cached 30 MiB block and a new 32 MiB segment
	// exceeds the limit: releasing the wholly free cached segment makes room.
	b3, ok3 := a.Alloc(32 << 20)
	if !ok3 || a.Reserved != 62<<20 {
		t.Fatalf("release of cached segments must let 32 MiB fit: ok=%v reserved %d", ok3, a.Reserved)
	}
	_, ok4 := a.Alloc(8 << 20)
	if ok4 {
		t.Fatalf("8 MiB (20 MiB segment) cannot fit 62 MiB reserved under a 64 MiB limit")
	}
	_ = b2
	_ = b3
}

// TestAllocationSize: what "Tried to allocate" reports is the segment a
// request would need (get_allocation_size): 2 MiB up to 1 MiB, 20 MiB
// below 10 MiB, else rounded up to 2 MiB.
func TestAllocationSize(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{1, 2 << 20},
		{1 << 20, 2 << 20},
		{1<<20 + 1, 20 << 20},
		{4 << 20, 20 << 20},
		{10 << 20, 10 << 20},
		{412_090_368, 394 << 20}, // 2 x 1024 x 50304 fp32 logits: "Tried to allocate 394.00 MiB" (karpathy/nanoGPT#88)
	} {
		if got := AllocationSize(c.n); got != c.want {
			t.Errorf("AllocationSize(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
