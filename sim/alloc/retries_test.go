package alloc

import "testing"

// TestAllocatorRetries counts the requests retried after the cache was
// released (num_alloc_retries: c10/cuda/CUDACachingAllocator.cpp at
// v2.0.0, malloc calls alloc_block(isRetry=true) after
// release_cached_blocks, and alloc_block counts it). Each case allocates
// three 20 MiB blocks (three 20 MiB segments, or three 20 MiB pages of an
// expandable segment: 60 MiB reserved), frees the first, then asks for
// the request: it fits no cached block and needs a new segment (pages).
func TestAllocatorRetries(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name       string
		limit      int64
		expandable bool
		request    int64
		retries    int
		ok         bool
		reserved   int64 // after the request
	}{
		// 60 + 24 MiB > 64: the free 20 MiB segment goes back (40
		// reserved), and the 24 MiB segment fits the retry: 64.
		{"released and retried", 64 * mib, false, 24 * mib, 1, true, 64 * mib},
		// 60 + 24 <= 100: cudaMalloc succeeds at once, no retry.
		{"fits at first", 100 * mib, false, 24 * mib, 0, true, 84 * mib},
		// No limit: never a retry.
		{"no limit", 0, false, 24 * mib, 0, true, 84 * mib},
		// 40 + 30 MiB > 64 even after the release: the retry is the OOM,
		// and PyTorch counts it before raising.
		{"retry is the OOM", 64 * mib, false, 30 * mib, 1, false, 70 * mib},
		// Expandable: 30 MiB maps two 20 MiB pages, 60 + 40 > 80; the
		// release unmaps the free page at the start (40 mapped), and the
		// retry maps two pages at the end: 80.
		{"expandable released and retried", 80 * mib, true, 30 * mib, 1, true, 80 * mib},
		{"expandable fits at first", 100 * mib, true, 30 * mib, 0, true, 100 * mib},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Allocator{Limit: c.limit, Expandable: c.expandable}
			var first *Block
			for i := range 3 {
				b, ok := a.Alloc(20 * mib)
				if !ok || a.Retries != 0 {
					t.Fatalf("block %d: ok %v, retries %d: the first 60 MiB fit at once", i, ok, a.Retries)
				}
				if i == 0 {
					first = b
				}
			}
			a.Release(first)
			_, ok := a.Alloc(c.request)
			if a.Retries != c.retries || ok != c.ok || a.Reserved != c.reserved {
				t.Errorf("retries %d ok %v reserved %d MiB, want %d %v %d MiB", a.Retries, ok, a.Reserved/mib, c.retries, c.ok, c.reserved/mib)
			}
		})
	}
}

// TestAllocatorRetriesStopAtOOM: past the OOM, where PyTorch has raised,
// the replay's further requests past the limit are not counted; before
// it, a retry is counted even when there is nothing cached to release
// (release_cached_blocks runs and alloc_block(isRetry=true) is called).
func TestAllocatorRetriesStopAtOOM(t *testing.T) {
	const mib = 1 << 20
	a := Allocator{Limit: 40 * mib}
	for range 2 {
		if _, ok := a.Alloc(20 * mib); !ok {
			t.Fatal("two 20 MiB blocks fit under 40 MiB")
		}
	}
	if a.Retries != 0 {
		t.Fatalf("retries %d before the limit, want 0", a.Retries)
	}
	if _, ok := a.Alloc(20 * mib); ok {
		t.Fatal("a third 20 MiB block does not fit under 40 MiB")
	}
	if a.Retries != 1 {
		t.Fatalf("retries %d at the OOM (nothing cached), want 1", a.Retries)
	}
	for range 3 {
		a.Alloc(20 * mib)
	}
	if a.Retries != 1 {
		t.Errorf("retries %d after requests past the OOM, want still 1", a.Retries)
	}
}
