package alloc

import (
	"math"
	"testing"
)

// TestSizeBucketsAgainstScan drives the allocator with a pseudo-random
// trace whose free lists grow to hundreds of blocks and shrink again,
// twice (so that sizeBuckets picks most blocks, and is built and dropped):
// requests of many sizes in both pools, freed in a mixed order. At every
// request the pick must be the block a scan of the free list picks, and
// after every event the buckets must hold exactly the listed blocks
// (checkMid, through checkIndex), and the largest free size and its count,
// while kept, must be the list's (checkLargest).
func TestSizeBucketsAgainstScan(t *testing.T) {
	var a Allocator
	var live []*Block
	seed := uint64(7)
	next := func(n int) int { // a fixed pseudo-random sequence (an LCG)
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	// Sizes within a power of two and across several: both pools, equal
	// sizes (ties by position), exact fits and splits.
	sizes := []int64{512, 1536, 4096, 64 << 10, 1 << 20, 3 << 20, 5 << 20, 6 << 20, 12 << 20, 12<<20 + 512, 40 << 20, 100 << 20}
	longest, built, dropped := 0, 0, 0
	on := false
	for i := range 20000 {
		release := 2 // of 5: the live blocks grow, then shrink to none, twice
		if i%10000 >= 6000 {
			release = 4
		}
		if i%10000 == 9999 { // cached segments released: the lists shrink to a few blocks
			a.releaseCached(DefaultStream)
		}
		if len(live) > 0 && next(5) < release {
			k := next(len(live))
			a.Release(live[k])
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			n := sizes[next(len(sizes))] + int64(next(4))*512*int64(next(2))
			list := listOf(DefaultStream, poolOf(RoundSize(n)))
			if got, want := a.bestFit(list, RoundSize(n)), scanBestFit(&a, list, n); got != want {
				t.Fatalf("event %d, alloc(%d): the pick is %v, the scan's %v", i, n, got, want)
			}
			b, _ := a.Alloc(n)
			live = append(live, b)
		}
		for l := range a.lists {
			fl := &a.lists[l]
			longest = max(longest, fl.n)
			checkIndex(t, &fl.index, fl.sizes[:fl.n])
			checkLargest(t, i, l, fl)
			if i%3 == 0 {
				a.cached(l) // known again, for the events after to keep
			}
		}
		if mid := len(a.lists) > 1 && a.lists[1].index.midOn; mid != on {
			if mid {
				built++
			} else {
				dropped++
			}
			on = mid
		}
	}
	if longest < 2*indexAbove/16 || longest > indexAbove || built < 2 || dropped < 2 {
		t.Fatalf("the longest free list held %d blocks, the large pool's buckets were built %d times, dropped %d: want hundreds of blocks, under the class index's %d, and both", longest, built, dropped, indexAbove)
	}
}

// TestBucketOfOrdered checks what sizeBuckets.best relies on: a larger
// size is never in an earlier bucket, and every positive int64 size has a
// bucket below bucketCount. Sizes around every power of two and every
// eighth of one, and pseudo-random ones, are checked against the next.
func TestBucketOfOrdered(t *testing.T) {
	var sizes []int64
	for e := 0; e < 63; e++ {
		for k := int64(0); k < 8; k++ {
			at := int64(1)<<e + k*(int64(1)<<e>>3)
			for d := int64(-2); d <= 2; d++ {
				if s := at + d; s > 0 && s < math.MaxInt64 {
					sizes = append(sizes, s)
				}
			}
		}
	}
	seed := uint64(5)
	for range 10000 {
		seed = seed*6364136223846793005 + 1442695040888963407
		if s := int64(seed >> (1 + seed%63)); s > 0 && s < math.MaxInt64 {
			sizes = append(sizes, s)
		}
	}
	for _, s := range sizes {
		if b, next := bucketOf(s), bucketOf(s+1); next < b || next >= bucketCount {
			t.Fatalf("bucketOf(%d) = %d, bucketOf(%d) = %d: want ordered, below %d", s, b, s+1, next, bucketCount)
		}
	}
	if b := bucketOf(math.MaxInt64); b >= bucketCount {
		t.Fatalf("bucketOf(MaxInt64) = %d, want below %d", b, bucketCount)
	}
}

// checkLargest checks what free list fl keeps of its largest block while
// it keeps it (largestKnown): its size and how many blocks have it,
// against the list (after event i, of list l).
func checkLargest(t *testing.T, i, l int, fl *freeList) {
	t.Helper()
	if !fl.largestKnown {
		return
	}
	var largest int64
	k := 0
	for _, n := range fl.sizes[:fl.n] {
		switch {
		case n > largest:
			largest, k = n, 1
		case n == largest:
			k++
		}
	}
	if fl.largest != largest || fl.nLargest != k {
		t.Fatalf("event %d, list %d: the largest free block kept is %d bytes, %d of them; the list's is %d bytes, %d of them", i, l, fl.largest, fl.nLargest, largest, k)
	}
}
