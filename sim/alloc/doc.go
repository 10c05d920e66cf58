// Package alloc models PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp): requests rounded to 512 B, a small
// and a large pool, 2 MiB and 20 MiB segments, best-fit blocks that split
// and merge, cached segments released and retried before an out-of-memory
// (each retry counted, as torch.cuda.memory_stats()'s num_alloc_retries),
// and, with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, one growing
// segment per pool mapped page by page. Pools are per stream: a block
// serves only the stream that allocated it, and a block another stream
// used (record_stream) is reused only once that stream has caught up
// (streams.go).
//
// It knows nothing of models or steps: the replay (package sim) asks it for
// blocks and gives them back, and reads reserved memory, the bytes
// allocated and the state at the first request that did not fit (PyTorch's
// OOM message reports memory before the failed allocation). It can be
// driven and tested on its own.
//
// Its functions carry //go:norace: the race detector does not instrument
// them. An Allocator is a value owned by one replay, its blocks and
// segments are reachable only through it, and nothing in it starts or
// meets a goroutine, so the detector has no race to find here; its
// checks were most of a race build's instructions (each read of a field
// is a checked call: a 65,536-layer step past the device's limit makes a
// million allocations, and the FuzzSizes seeds ran 6-8 s under -race). The
// callers' own reads and writes of an Allocator (the replay's) stay
// instrumented.
package alloc
