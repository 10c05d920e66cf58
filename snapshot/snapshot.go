package snapshot

// The data model mirrors the dict torch.cuda.memory._snapshot() returns
// (torch/cuda/memory.py, _memory_viz.py: "segments", "device_traces"),
// with the keys the viewer and _memory_viz read.

// Snapshot is one device's memory history and final state.
type Snapshot struct {
	Segments []Segment
	Trace    []Event // the device trace, in order
}

// Segment is one cudaMalloc'd (or expandable, mapped) range.
type Segment struct {
	Address       int64
	TotalSize     int64
	AllocatedSize int64 // bytes of its blocks in use
	RequestedSize int64 // bytes those blocks were asked for (before rounding)
	Stream        int64
	SegmentType   string // "small" (<= 1 MiB requests) or "large"
	Expandable    bool
	Blocks        []Block
}

// Block is a range of a segment: in use ("active_allocated") or cached
// ("inactive").
type Block struct {
	Address       int64
	Size          int64
	RequestedSize int64
	State         string
	Frames        []Frame
}

// Event is one entry of the device trace.
type Event struct {
	Action string // alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, oom
	Addr   int64
	Size   int64
	Stream int64
	TimeUS int64 // microseconds since the trace began; memsh writes the event's index
	Frames []Frame
}

// Frame is one stack frame of an event. memsh's frames name the module path
// (Name), the op (Filename) and the phase (Line is 0): what a Python stack
// would show through the model's forward.
type Frame struct {
	Name     string
	Filename string
	Line     int64
}

// The trace actions.
const (
	Alloc         = "alloc"
	FreeRequested = "free_requested"
	FreeCompleted = "free_completed"
	SegmentAlloc  = "segment_alloc"
	SegmentFree   = "segment_free"
	SegmentMap    = "segment_map"
	SegmentUnmap  = "segment_unmap"
	OOM           = "oom"
)

// Peaks replays the trace: the most bytes allocated (alloc to
// free_requested: the caching allocator stops counting a block as
// allocated when it is freed, before the streams that used it are done)
// and reserved (segment_alloc/map to segment_free/unmap) at once, counting
// what was there before the trace began (BeforeTrace). PyTorch's trace
// records what each allocation asked for, so the first is the peak of
// requested bytes (torch.cuda.max_memory_allocated counts them rounded up
// to their blocks); the second is max_memory_reserved.
func (s *Snapshot) Peaks() (allocated, reserved int64) {
	a, r := s.BeforeTrace()
	allocated, reserved = a, r
	for _, e := range s.Trace {
		switch e.Action {
		case Alloc:
			a += e.Size
		case FreeRequested:
			a -= e.Size
		case SegmentAlloc, SegmentMap:
			r += e.Size
		case SegmentFree, SegmentUnmap:
			r -= e.Size
		}
		allocated, reserved = max(allocated, a), max(reserved, r)
	}
	return allocated, reserved
}

// BeforeTrace is what was allocated and reserved when the trace began: a
// run records its history from some step on (tools/record_snapshot.py),
// after the parameters and optimizer state exist. It is the final
// segments' blocks in use (their requested bytes, as the trace counts)
// and segment sizes, less what the trace added; zero for a snapshot
// without segments, or one whose trace holds its whole history.
func (s *Snapshot) BeforeTrace() (allocated, reserved int64) {
	if len(s.Segments) == 0 {
		return 0, 0
	}
	for _, g := range s.Segments {
		reserved += g.TotalSize
		for _, b := range g.Blocks {
			if b.State != "active_allocated" {
				continue
			}
			if b.RequestedSize > 0 {
				allocated += b.RequestedSize
			} else {
				allocated += b.Size
			}
		}
	}
	for _, e := range s.Trace {
		switch e.Action {
		case Alloc:
			allocated -= e.Size
		case FreeRequested: // a block pending its streams at the end is no longer active_allocated
			allocated += e.Size
		case SegmentAlloc, SegmentMap:
			reserved -= e.Size
		case SegmentFree, SegmentUnmap:
			reserved += e.Size
		}
	}
	return max(allocated, 0), max(reserved, 0)
}

// Frames are the frames memsh writes for an allocation, innermost first:
// {name: tensor, filename: op}, {name: phase, filename: module path},
// {name: source, filename: "memsh"}. The oracle's recorder
// (tools/oracle/snapshot.py) writes the same form with source "oracle",
// so that Compare can sum both sides by module and phase.
func Frames(tensor, op, module, phase, source string) []Frame {
	return []Frame{{Name: tensor, Filename: op}, {Name: phase, Filename: module}, {Name: source, Filename: "memsh"}}
}

// memshFrames reads the module path and phase out of frames in the form
// Frames writes.
func memshFrames(fs []Frame) (module, phase string, ok bool) {
	if len(fs) == 3 && fs[2].Filename == "memsh" {
		return fs[1].Filename, fs[1].Name, true
	}
	return "", "", false
}
