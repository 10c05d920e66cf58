package alloc

import "testing"

// TestFreeIndexManyOfASize drives the allocator as a long repeated step
// past the device does: thousands of free tails of one size (a 16.5 MiB
// request takes an 18 MiB segment and leaves a 1.5 MiB free tail), taken and
// given back in a mixed order. At every request the index must pick the
// block the free-list scan picks, and the index must hold one class per
// size with every block's position (checkIndex).
func TestFreeIndexManyOfASize(t *testing.T) {
	var a Allocator
	var live []*Block
	seed := uint64(1)
	next := func(n int) int { // a fixed pseudo-random sequence (an LCG)
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	// 16.5 MiB (tails of 1.5 MiB), 1.25 MiB (fits a tail, leaves none:
	// 256 KiB is under the large pool's split threshold), 3 MiB (a 20 MiB
	// segment, or a larger merged block, split).
	sizes := []int64{33 << 19, 5 << 18, 3 << 20}
	maxList, classes := 0, 0 // the longest list, and its classes then
	for i := range 12000 {
		if i >= 4000 && next(3) == 0 { // first build up the tails
			k := next(len(live))
			a.Release(live[k])
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		n := sizes[0]
		if i >= 4000 {
			n = sizes[next(len(sizes))]
		}
		list := listOf(DefaultStream, poolOf(RoundSize(n)))
		if got, want := a.bestFit(list, RoundSize(n)), scanBestFit(&a, list, n); got != want {
			t.Fatalf("event %d, alloc(%d): the index picks %v, the scan %v", i, n, got, want)
		}
		b, _ := a.Alloc(n)
		live = append(live, b)
		if l := a.lists[1].n; l > maxList {
			maxList, classes = l, len(a.lists[1].index.classes)
		}
		if i%1000 == 0 {
			checkIndex(t, &a.lists[1].index, a.lists[1].sizes[:a.lists[1].n])
		}
	}
	checkIndex(t, &a.lists[1].index, a.lists[1].sizes[:a.lists[1].n])
	// The case the classes are for: blocks past twice the index's
	// threshold (1,024), of a few sizes.
	if maxList <= 2*indexAbove || classes == 0 || classes > 8 {
		t.Fatalf("the free list peaked at %d blocks in %d classes: want more than %d blocks in a few classes", maxList, classes, 2*indexAbove)
	}
}
