package replay

import "testing"

// TestPinnedBlock: CachingHostAllocator rounds every pinned request up to
// a power of two (PowerOf2Ceil), so an exact power stays and one byte more
// doubles.
func TestPinnedBlock(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{0, 0},
		{1, 1},
		{2, 2},
		{3, 4},
		{1024, 1024},
		{1025, 2048},
		{50_331_648, 67_108_864},   // a Llama 3.2 3B layer input, 2 x 4096 x 3072 bf16 (48 MiB) -> 64 MiB
		{100_663_296, 134_217_728}, // its fp32 copy (96 MiB) -> 128 MiB
		{1 << 33, 1 << 33},         // 8 GiB
		{1<<33 + 1, 1 << 34},
	} {
		if got := PinnedBlock(c.n); got != c.want {
			t.Errorf("PinnedBlock(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
