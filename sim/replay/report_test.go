package replay

import "testing"

// TestFormatSize: PyTorch's format_size (c10/cuda/CUDACachingAllocator.cpp)
// prints bytes up to 1024, KiB up to 1 MiB, MiB up to 1 GiB, then GiB, two
// decimals: the boundaries themselves stay in the smaller unit.
func TestFormatSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1024, "1024 bytes"},
		{1025, "1.00 KiB"},
		{1 << 20, "1024.00 KiB"},
		{1<<20 + 1, "1.00 MiB"},
		{20 << 20, "20.00 MiB"},
		{1 << 30, "1024.00 MiB"},
		{6_593_445_888, "6.14 GiB"}, // nanoGPT's fp32 logits, 32 x 1024 x 50304 x 4 B (karpathy/nanoGPT#88)
	} {
		if got := gib(c.n); got != c.want {
			t.Errorf("gib(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
