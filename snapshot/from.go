package snapshot

import (
	"fmt"

	"github.com/memsh/memsh/sim/replay"
)

// FromReport is the memory snapshot of a replayed step: the replay's
// device trace and final segments (simulated with core.Options.Trace).
// Every event's frames name what PyTorch's Python stack would show through
// the model: the tensor (as the function name), the op's module path (as
// the file) and the phase of the step.
func FromReport(r *replay.Report) (*Snapshot, error) {
	t := r.Trace
	if t == nil {
		return nil, fmt.Errorf("the report has no device trace (simulate it with the trace on)")
	}
	s := &Snapshot{}
	for _, g := range t.Segments {
		seg := Segment{Address: g.Addr, TotalSize: g.Size, Stream: int64(g.Stream), SegmentType: "large", Expandable: g.Expandable}
		if g.Small {
			seg.SegmentType = "small"
		}
		for _, b := range g.Blocks {
			blk := Block{Address: b.Addr, Size: b.Size, State: "inactive"}
			switch {
			case b.InUse:
				blk.State, blk.RequestedSize = "active_allocated", t.Requested[b.Addr]
				blk.Frames = []Frame{{Name: t.Tensors[b.Addr], Filename: "memsh"}}
				seg.AllocatedSize += b.Size
				seg.RequestedSize += blk.RequestedSize
			case b.Pending: // freed, waiting for the streams that used it
				blk.State = "active_pending_free"
			}
			seg.Blocks = append(seg.Blocks, blk)
		}
		s.Segments = append(s.Segments, seg)
	}
	requested := map[int64]bool{} // blocks freed but waiting for other streams, by address
	for i, e := range t.Events {
		ev := Event{Action: e.Action, Addr: e.Addr, Size: e.Size, Stream: int64(e.Stream), TimeUS: int64(i), Frames: frameOf(e)}
		switch e.Action {
		case FreeRequested:
			requested[e.Addr] = true
		case FreeCompleted:
			// PyTorch records the request, then its completion once the
			// streams that used the block are done: at once when none did.
			if !requested[e.Addr] {
				s.Trace = append(s.Trace, Event{Action: FreeRequested, Addr: e.Addr, Size: e.Size, Stream: ev.Stream, TimeUS: ev.TimeUS, Frames: ev.Frames})
			}
			delete(requested, e.Addr)
		}
		s.Trace = append(s.Trace, ev)
	}
	return s, nil
}

// frameOf is an event's frames, innermost first, as memory_viz shows a
// Python stack: the tensor in its op, the phase in its module, then memsh's
// mark (see Frames). What setup allocates for a parameter is in the
// parameter's module (replay's trace places it).
func frameOf(e replay.TraceEvent) []Frame {
	name := e.Tensor
	if name == "" {
		name = e.Action
	}
	return Frames(name, e.Op, e.Module, e.Phase.String(), "memsh")
}
