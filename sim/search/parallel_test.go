package search

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
)

// parallelChunks runs every item once, on a worker in range, and calls
// progress at the same counts whatever the chunk (it divides 1,024): a
// chunked loop is the one-item loop with less hand-out.
func TestParallelChunksRunsEachItemOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 63, 64, 65, 1023, 1024, 1025, 3000} {
		for _, workers := range []int{1, 2, 3} {
			var want []int
			for _, chunk := range []int{1, cheapChunk} {
				ran := make([]atomic.Int32, n)
				var bad atomic.Bool
				var ticks []int
				parallelChunks(context.Background(), workers, n, chunk, func(done int) { ticks = append(ticks, done) }, func(w, i int) {
					if w < 0 || w >= max(workers, 1) {
						bad.Store(true)
					}
					ran[i].Add(1)
				})
				for i := range ran {
					if c := ran[i].Load(); c != 1 {
						t.Fatalf("n %d, workers %d, chunk %d: item %d ran %d times", n, workers, chunk, i, c)
					}
				}
				if bad.Load() {
					t.Errorf("n %d, workers %d, chunk %d: a worker out of range", n, workers, chunk)
				}
				if chunk == 1 {
					want = ticks
				} else if !slices.Equal(ticks, want) {
					t.Errorf("n %d, workers %d, chunk %d: progress %v, one item at a time %v", n, workers, chunk, ticks, want)
				}
			}
		}
	}
}

// A cancelled context stops the hand-out: no item runs.
func TestParallelChunksStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, workers := range []int{1, 2} {
		var ran atomic.Int32
		parallelForCheap(ctx, workers, 1000, nil, func(int) { ran.Add(1) })
		if ran.Load() != 0 {
			t.Errorf("workers %d: %d items ran after the context ended", workers, ran.Load())
		}
	}
}
