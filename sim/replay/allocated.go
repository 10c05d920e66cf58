package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// An allocation in two halves (allocateParts is both): the block first,
// then its record, with or without the allocation's description.

// allocBlock asks the allocator for a block of n bytes (n > 0) on the
// current stream: the first half of allocateParts. With what it returns,
// plain says whether the report keeps nothing of the allocation's
// description, keepPlain then records it without one, else allocated
// does with it: the callers that make most of a step's tensors (produce,
// the backward's gradients, workspaces) make the Alloc only when it is
// kept (writing and copying it at each allocation was a fifth of the
// bookkeeping's instructions).
//
//go:norace
func (r *Replay) allocBlock(n int64) (*alloc.Block, bool) {
	r.grew = false
	return r.alloc.AllocOn(n, r.stream)
}

// plain says whether allocated would record the allocation of n bytes
// that allocBlock just made (ok: it fit) without reading its
// description: no OOM to report, and, outside a quiet replay, no trace,
// no new largest allocation and no growth of the reserve past its peak.
//
//go:norace
func (r *Replay) plain(n int64, ok bool) bool {
	rep := r.Rep
	if !ok && rep.OOM == nil {
		return false
	}
	if r.quiet {
		return true
	}
	return r.traced == nil && n <= rep.Largest.Bytes && !(r.grew && r.alloc.Reserved > rep.PeakReserved)
}

// keepPlain is allocated for an allocation plain says needs no
// description.
//
//go:norace
func (r *Replay) keepPlain(blk *alloc.Block, cat core.Category) int32 {
	id := r.live.add(liveTensor{blk: blk.Ref(), cat: cat})
	r.cur[cat] += blk.Size
	rep := r.Rep
	if r.quiet || (r.alloc.Allocated <= rep.PeakAllocated && !r.opts.Timeline) {
		// sample's usual case, without its call: no new peak of
		// allocated memory, no timeline (a quiet replay keeps neither)
		rep.PeakReserved = max(rep.PeakReserved, r.alloc.Reserved)
		return id
	}
	r.sample()
	return id
}

// allocated records the allocation a (described as parts joins it)
// that allocBlock made: blk, ok. It returns its tensor id.
//
//go:norace
func (r *Replay) allocated(a Alloc, parts allocParts, blk *alloc.Block, ok bool) int32 {
	a.Phase, a.Op = r.phase, r.op
	rep := r.Rep
	if r.quiet {
		if !ok && rep.OOM == nil {
			rep.OOM = r.oomAt(parts.join(a))
		}
		id := r.live.add(liveTensor{blk: blk.Ref(), cat: a.Cat})
		r.cur[a.Cat] += blk.Size
		rep.PeakReserved = max(rep.PeakReserved, r.alloc.Reserved)
		return id
	}
	// Each field is read once below: under the race detector every read
	// is a checked call, and a step past the limit makes a million
	// allocations (the FuzzSizes repeat_65536 seeds).
	traced, largest := r.traced, rep.Largest.Bytes
	oom := !ok && rep.OOM == nil // the first request that did not fit
	pending := parts             // what a still lacks
	if traced != nil || oom || a.Bytes > largest {
		a, pending = parts.join(a), allocParts{}
	}
	if reserved := r.alloc.Reserved; r.grew && reserved > rep.PeakReserved {
		// Past the limit the reserve grows at nearly every request: the
		// report's one PeakGrowth is overwritten, not made again, and its
		// description joined once the step is done (finish).
		g := rep.Frag.PeakGrowth
		if g == nil {
			g = new(PeakGrowth)
			rep.Frag.PeakGrowth = g
		}
		// Field by field: a composite literal read r.growth a field at
		// a time, a checked read each under the race detector.
		g.Alloc, g.Growth, g.Reserved, g.parts = a, r.growth, reserved, pending
	}
	if traced != nil {
		if oom {
			rep.Trace.Events = append(rep.Trace.Events, TraceEvent{Action: "oom", Size: a.Bytes, Tensor: a.Tensor, Op: r.op, Module: rep.Trace.module(r.op), Phase: r.phase})
		}
		r.traceAlloc(a, blk)
	}
	id := r.live.add(liveTensor{blk: blk.Ref(), cat: a.Cat})
	r.cur[a.Cat] += blk.Size
	if oom {
		rep.OOM = r.oomAt(a)
	}
	if a.Bytes > largest {
		rep.Largest = a
	}
	r.sample()
	return id
}
