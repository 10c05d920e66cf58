package replay

import "github.com/memsh/memsh/sim/alloc"

// The device trace (core.Options.Trace): every allocation, free and
// segment event of the step with its device address, and the allocator's
// segments when the step ends. It is what a PyTorch memory snapshot
// records (torch.cuda.memory._record_memory_history), so package snapshot
// writes it in that format.

// TraceEvent is one allocator event of the step.
type TraceEvent struct {
	Action string // alloc, free_completed, oom, or one of alloc's segment kinds
	Addr   int64
	Size   int64 // the block's (rounded) size, or the segment's
	Tensor string
	Op     string
	Phase  Phase
}

// Trace is a step's device trace and final allocator state.
type Trace struct {
	Events   []TraceEvent
	Segments []alloc.SegmentInfo
	// Tensors names the tensor in each block in use at the end, by address.
	Tensors map[int64]string
	// Requested is the bytes asked for, by block address, for blocks in use
	// at the end (blocks are rounded up).
	Requested map[int64]int64
}

// traceAlloc records the allocation of blk for a.
func (r *Replay) traceAlloc(a Alloc, blk *alloc.Block) {
	t := r.Rep.Trace
	t.Events = append(t.Events, TraceEvent{Action: "alloc", Addr: blk.Addr(), Size: blk.Size, Tensor: a.Tensor, Op: r.op, Phase: r.phase})
	r.traced[blk] = tracedTensor{a.Tensor, a.Bytes}
}

// traceFree records the free of blk.
func (r *Replay) traceFree(blk *alloc.Block) {
	t := r.Rep.Trace
	t.Events = append(t.Events, TraceEvent{Action: "free_completed", Addr: blk.Addr(), Size: blk.Size, Tensor: r.traced[blk].name, Op: r.op, Phase: r.phase})
	delete(r.traced, blk)
}

// traceSegment records a segment event of the allocator.
func (r *Replay) traceSegment(e alloc.SegmentEvent) {
	t := r.Rep.Trace
	t.Events = append(t.Events, TraceEvent{Action: e.Kind, Addr: e.Addr, Size: e.Size, Op: r.op, Phase: r.phase})
}

// traceEnd records the allocator's segments and what their blocks hold.
func (r *Replay) traceEnd() {
	t := r.Rep.Trace
	t.Segments = r.alloc.Segments()
	t.Tensors, t.Requested = map[int64]string{}, map[int64]int64{}
	for _, s := range t.Segments {
		for _, b := range s.Blocks {
			if tt, ok := r.traced[b.Block()]; ok && b.InUse {
				t.Tensors[b.Addr], t.Requested[b.Addr] = tt.name, tt.bytes
			}
		}
	}
}

// tracedTensor is what the trace knows of a block in use.
type tracedTensor struct {
	name  string
	bytes int64
}
