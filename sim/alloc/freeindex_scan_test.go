package alloc

import "testing"

// TestScanBestFit checks the short list's scan against its definition:
// the first block in list order of the smallest size >= n, or none.
func TestScanBestFit(t *testing.T) {
	const big = int64(1) << 62
	cases := []struct {
		name  string
		sizes []int64
		n     int64
	}{
		{"empty", nil, 512},
		{"none fits", []int64{512, 1024}, 2048},
		{"smaller first", []int64{512, 4096, 2048, 8192}, 1024},
		{"exact after a larger", []int64{8192, 2048, 1024, 2048}, 2048},
		{"first of equal sizes", []int64{4096, 3072, 3072, 3072}, 2048},
		{"exact is not the first fit", []int64{512, 8192, 1024, 1024}, 1024},
		{"a size far below n", []int64{1, big, big + big/2}, big},
		{"n of one byte", []int64{512, 512}, 1},
		{"sizes near the int64 limit", []int64{big + 3, big + 1, big + 2}, big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := -1
			for i, s := range c.sizes {
				if s >= c.n && (want < 0 || s < c.sizes[want]) {
					want = i
				}
			}
			var x freeIndex
			got := x.best(c.n, c.sizes)
			switch {
			case want < 0 && got >= 0:
				t.Errorf("best(%d) of %v = a block of %d, want none", c.n, c.sizes, c.sizes[got])
			case want >= 0 && got != want:
				t.Errorf("best(%d) of %v is not block %d (%d bytes)", c.n, c.sizes, want, c.sizes[want])
			}
		})
	}
}

// TestScanSizesAgainstDefinition checks scanSizes on pseudo-random lists
// of every length up to 40 (the runs of four it passes over, and the
// sizes after the last run) drawn from a few sizes (ties, exact fits),
// against the definition: the first of the smallest sizes >= n.
func TestScanSizesAgainstDefinition(t *testing.T) {
	seed := uint64(3)
	next := func(n int) int { // a fixed pseudo-random sequence (an LCG)
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	pool := []int64{512, 1024, 1536, 4096, 1 << 20, 1<<20 + 512, 20 << 20, 1 << 40}
	for trial := range 4000 {
		sizes := make([]int64, trial%41)
		for i := range sizes {
			sizes[i] = pool[next(len(pool))]
		}
		n := pool[next(len(pool))] + int64(next(3)-1)*512
		want := -1
		for i, s := range sizes {
			if s >= n && (want < 0 || s < sizes[want]) {
				want = i
			}
		}
		if got := scanSizes(n, sizes); got != want {
			t.Fatalf("scanSizes(%d, %v) = %d, want %d", n, sizes, got, want)
		}
	}
}
