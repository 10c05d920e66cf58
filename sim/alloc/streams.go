package alloc

import "slices"

// Streams, as c10/cuda/CUDACachingAllocator.cpp serves them:
//
//   - a block belongs to the stream whose request created its segment
//     (Block::stream): the free-block search orders the pool by (stream,
//     size, address) and takes a block only of the request's stream
//     (BlockComparatorSize, get_free_block), so each stream has its own
//     small and large pools, and with expandable segments its own
//     segment per pool (find_expandable_block matches the stream).
//     Among free blocks of one size PyTorch takes the lowest address;
//     memsh takes the first in its free list's order (freeindex.go), a
//     deliberate departure: with the address order the three 70B
//     layouts' peaks did not move, but six calibrated figures did, away
//     from their measurements (the H200 oracle's gpt2 full-checkpoint
//     reserved -4.8 -> -5.9 %, QLoRA Llama-2-7B batch 10 +9.0 %, and the
//     FSDP1 offload, checkpoint budget, nested checkpoint and FSDP2 hand
//     counts), which says the list order stands in for what the model
//     does not track (blocks split and freed in the same order);
//   - tensor.record_stream(s) adds s to the block's stream_uses; when
//     such a block is freed its bytes stop counting as allocated at once,
//     but an event is recorded on every stream that used it
//     (insert_events) and the block is freed for reuse only once they
//     have all completed (process_events, at the start of each malloc);
//   - releasing the cache (release_cached_blocks, before an
//     out-of-memory is reported) first waits for every outstanding event
//     (synchronize_and_free_events), then releases whole free segments of
//     every stream (past the OOM, memsh releases the requesting stream's
//     only: releaseCached).
//
// The model has no GPU clock: the replay says when a stream has caught up
// (Synchronize), in the allocator's own clock, which ticks at every
// allocation and release (Mark).

// Stream is a CUDA stream as the allocator sees it; 0 is the default
// (compute) stream.
type Stream uint8

// DefaultStream is the stream a step computes on.
const DefaultStream Stream = 0

// streams is the allocator's per-stream state.
type streams struct {
	clock    int64               // ticks at every Alloc and Release
	done     []int64             // by stream: the clock up to which its work is complete
	uses     map[*Block][]Stream // blocks in use that other streams used (record_stream)
	pending  []pendingFree
	reserved []int64 // by stream: bytes of its segments (mapped pages)
	peak     []int64 // by stream: the most it reserved at once
	inUse    []int64 // by stream: bytes allocated
}

// pendingFree is a released block waiting for the streams that used it.
type pendingFree struct {
	b       *Block
	freedAt int64 // the clock at its release
	uses    []Stream
}

// listOf is the free list of stream s's pool (0 small, 1 large).
//
//go:norace
func listOf(s Stream, pool int) int { return int(s)*2 + pool }

// grow makes the lists up to list exist and returns list.
//
//go:norace
func (a *Allocator) grow(list int) int {
	for len(a.lists) <= list {
		a.lists = append(a.lists, freeList{index: freeIndex{above: a.indexAbove[len(a.lists)%2]}})
	}
	return list
}

//go:norace
func (a *Allocator) reservedOn(s Stream, n int64) {
	for len(a.reserved) <= int(s) {
		a.reserved = append(a.reserved, 0)
		a.peak = append(a.peak, 0)
	}
	r := a.reserved[s] + n
	a.reserved[s] = r
	if r > a.peak[s] {
		a.peak[s] = r
	}
}

// ReservedOn is the bytes reserved in stream s's segments.
//
//go:norace
func (a *Allocator) ReservedOn(s Stream) int64 {
	if int(s) < len(a.reserved) {
		return a.reserved[s]
	}
	return 0
}

//go:norace
func (a *Allocator) allocatedOn(s Stream, n int64) {
	for len(a.inUse) <= int(s) {
		a.inUse = append(a.inUse, 0)
	}
	a.inUse[s] += n
}

// AllocatedOn is the bytes allocated in stream s's segments.
//
//go:norace
func (a *Allocator) AllocatedOn(s Stream) int64 {
	if int(s) < len(a.inUse) {
		return a.inUse[s]
	}
	return 0
}

// PeakReservedOn is the most stream s's segments held at once.
//
//go:norace
func (a *Allocator) PeakReservedOn(s Stream) int64 {
	if int(s) < len(a.peak) {
		return a.peak[s]
	}
	return 0
}

// Streams is how many streams have had segments (the highest stream
// number plus one).
//
//go:norace
func (a *Allocator) Streams() int { return len(a.reserved) }

// Mark is the allocator's clock: a point in the order the program issues
// work, for Synchronize.
//
//go:norace
func (a *Allocator) Mark() int64 { return a.clock }

// RecordStream notes that stream s uses block b (tensor.record_stream):
// once released, b is not reused before s has done the work it was given
// until then. A block's own stream needs no record.
//
//go:norace
func (a *Allocator) RecordStream(b *Block, s Stream) {
	if s == b.stream || slices.Contains(a.uses[b], s) {
		return
	}
	if a.uses == nil {
		a.uses = map[*Block][]Stream{}
	}
	a.uses[b] = append(a.uses[b], s)
}

// Synchronize says stream s has completed the work issued up to mark:
// released blocks that waited only for such work are freed for reuse.
//
//go:norace
func (a *Allocator) Synchronize(s Stream, mark int64) {
	for len(a.done) <= int(s) {
		a.done = append(a.done, 0)
	}
	a.done[s] = max(a.done[s], mark)
	kept := a.pending[:0]
	for _, p := range a.pending {
		if a.complete(p) {
			a.finishFree(p.b)
		} else {
			kept = append(kept, p)
		}
	}
	clear(a.pending[len(kept):])
	a.pending = kept
}

// Pending reports whether b was released and waits for other streams.
//
//go:norace
func (b *Block) Pending() bool { return b.pending }

// Pending is the bytes of released blocks that wait for other streams.
//
//go:norace
func (a *Allocator) Pending() int64 {
	var n int64
	for _, p := range a.pending {
		n += p.b.Size
	}
	return n
}

// PendingOn is the bytes of released blocks that wait, among others, for
// stream s.
//
//go:norace
func (a *Allocator) PendingOn(s Stream) int64 {
	var n int64
	for _, p := range a.pending {
		if slices.Contains(p.uses, s) {
			n += p.b.Size
		}
	}
	return n
}

// complete reports whether every stream that used the released block
// has done the work issued until its release.
//
//go:norace
func (a *Allocator) complete(p pendingFree) bool {
	for _, s := range p.uses {
		if int(s) >= len(a.done) || a.done[s] < p.freedAt {
			return false
		}
	}
	return true
}

// deferFree holds the released block b until the streams that used it
// are done (insert_events).
//
//go:norace
func (a *Allocator) deferFree(b *Block, uses []Stream) {
	b.pending = true
	a.pending = append(a.pending, pendingFree{b, a.clock, uses})
}

// finishFree frees a pending block (free_block after its events).
//
//go:norace
func (a *Allocator) finishFree(b *Block) {
	b.pending = false
	if a.Observe != nil {
		a.Observe(SegmentEvent{Kind: FreeCompleted, Addr: a.Addr(b), Size: b.Size, Stream: b.stream, Block: b})
	}
	a.freeBlock(b)
}

// freePending frees every pending block, as if every stream were done
// (synchronize_and_free_events).
//
//go:norace
func (a *Allocator) freePending() {
	for _, p := range a.pending {
		a.finishFree(p.b)
	}
	clear(a.pending)
	a.pending = a.pending[:0]
}

// EmptyCache is torch.cuda.empty_cache() and then
// torch.cuda.reset_peak_memory_stats(): every segment that holds no
// allocation goes back to the device (release_cached_blocks, every
// stream's; with expandable segments, the free pages), and each stream's
// peak starts again from what it reserves now.
//
//go:norace
func (a *Allocator) EmptyCache() {
	a.releaseCached(DefaultStream)
	for s := range a.peak {
		a.peak[s] = a.reserved[s]
	}
}
