package replay

import (
	"strings"

	"github.com/memsh/memsh/sim/alloc"
)

// The device trace (core.Options.Trace): every allocation, free and
// segment event of the step with its device address, and the allocator's
// segments when the step ends. It is what a PyTorch memory snapshot
// records (torch.cuda.memory._record_memory_history), so package snapshot
// writes it in that format.

// TraceEvent is one allocator event of the step.
type TraceEvent struct {
	Action string // alloc, free_requested, free_completed, oom, or one of alloc's segment kinds
	Addr   int64
	// Size is the bytes the allocation asked for (before the allocator
	// rounds it up to its block), as PyTorch's trace records them
	// (TraceEntry orig_size, and requested_size at its free); a segment
	// event's is the segment's.
	Size   int64
	Stream alloc.Stream
	Tensor string
	Op     string
	// Module is the module path the op runs in ("layers.3.attn" for its
	// softmax); steps outside the model's ops ("batch", "optimizer.step")
	// are their own module.
	Module string
	Phase  Phase
}

// Trace is a step's device trace and final allocator state.
type Trace struct {
	Events   []TraceEvent
	Segments []alloc.SegmentInfo
	// PeakRequested is the most bytes asked for by the allocations live at
	// once: the peak of the trace's alloc and free events. The report's
	// PeakAllocated counts their rounded blocks, as
	// torch.cuda.max_memory_allocated does.
	PeakRequested int64
	requested     int64
	// Tensors names the tensor in each block in use at the end, by address.
	Tensors map[int64]string
	// Requested is the bytes asked for, by block address, for blocks in use
	// at the end (blocks are rounded up).
	Requested map[int64]int64
	modules   map[string]string // op name -> module path
	// Steady is the index in Events of the steady step's first event: a
	// replay that runs the first step before it (lazy_states.go) traces
	// both, the first step's events before Steady; 0 when the trace holds
	// one step.
	Steady int
}

// SteadyEvents is the steady step's events (the last step's).
func (t *Trace) SteadyEvents() []TraceEvent { return t.Events[t.Steady:] }

// module is the module path of the op named op.
func (t *Trace) module(op string) string {
	if m, ok := t.modules[op]; ok && m != "" {
		return m
	}
	return op
}

// allocModule is the module an allocation belongs to: its op's, but what
// setup allocates for a parameter (the parameter, its master copy,
// optimizer state, accumulated gradient) is in the parameter's module,
// where a Python stack would show the model's or the optimizer's
// constructor.
func (t *Trace) allocModule(op, tensor string, phase Phase) string {
	if phase == PhaseSetup {
		if m, ok := paramModule(tensor); ok {
			return m
		}
	}
	return t.module(op)
}

// paramModule is the module of a parameter's tensor name
// ("layers.0.mlp.up_proj.weight exp_avg" is in layers.0.mlp.up_proj).
func paramModule(tensor string) (string, bool) {
	first, _, _ := strings.Cut(tensor, " ")
	i := strings.LastIndexByte(first, '.')
	if i <= 0 {
		return "", false
	}
	switch first[i+1:] {
	case "weight", "bias", "grad":
		return first[:i], true
	}
	return "", false
}

// traceAlloc records the allocation of blk for a.
func (r *Replay) traceAlloc(a Alloc, blk *alloc.Block) {
	t := r.Rep.Trace
	t.Events = append(t.Events, TraceEvent{Action: "alloc", Addr: r.alloc.Addr(blk), Size: a.Bytes, Stream: blk.Stream(), Tensor: a.Tensor, Op: r.op, Module: t.allocModule(r.op, a.Tensor, r.phase), Phase: r.phase})
	r.traced[blk] = tracedTensor{a.Tensor, a.Bytes}
	t.requested += a.Bytes
	t.PeakRequested = max(t.PeakRequested, t.requested)
}

// traceFree records the release of blk, which was at addr before it
// merged with free neighbours: its free, or, when other streams still use
// it, the request (the allocator completes it later).
func (r *Replay) traceFree(blk *alloc.Block, addr int64) {
	t := r.Rep.Trace
	tt := r.traced[blk]
	action := "free_completed"
	if blk.Pending() {
		action = "free_requested"
	}
	t.Events = append(t.Events, TraceEvent{Action: action, Addr: addr, Size: tt.bytes, Stream: blk.Stream(), Tensor: tt.name, Op: r.op, Module: t.module(r.op), Phase: r.phase})
	t.requested -= tt.bytes // no longer allocated from the request on, as the allocator counts
	if action == "free_completed" {
		delete(r.traced, blk)
	}
}

// traceSegment records a segment event of the allocator, or a deferred
// free completing.
func (r *Replay) traceSegment(e alloc.SegmentEvent) {
	t := r.Rep.Trace
	ev := TraceEvent{Action: e.Kind, Addr: e.Addr, Size: e.Size, Stream: e.Stream, Op: r.op, Module: t.module(r.op), Phase: r.phase}
	if e.Kind == alloc.FreeCompleted {
		tt := r.traced[e.Block]
		ev.Tensor, ev.Size = tt.name, tt.bytes
		delete(r.traced, e.Block)
	}
	t.Events = append(t.Events, ev)
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
