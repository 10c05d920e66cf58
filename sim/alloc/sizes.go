package alloc

// RoundSize is a request's size as the allocator serves it: at least
// 512 B, a multiple of 512 B (kMinBlockSize).
//
//go:norace
func RoundSize(n int64) int64 {
	if n < minBlock {
		return minBlock
	}
	return (n + minBlock - 1) / minBlock * minBlock
}

// AllocationSize is the bytes the allocator asks the device for when no
// cached block serves a request of n bytes (get_allocation_size of the
// rounded size): a 2 MiB segment for up to 1 MiB, 20 MiB below 10 MiB,
// else the size rounded up to 2 MiB. PyTorch's out-of-memory message says
// "Tried to allocate" this much.
//
//go:norace
func AllocationSize(n int64) int64 { return segmentSize(RoundSize(n)) }

//go:norace
func poolOf(size int64) int {
	if size <= smallSize {
		return 0
	}
	return 1
}

//go:norace
func segmentSize(size int64) int64 {
	switch {
	case size <= smallSize:
		return smallBuffer
	case size < minLargeAlloc:
		return largeBuffer
	}
	return (size + roundLarge - 1) / roundLarge * roundLarge
}
