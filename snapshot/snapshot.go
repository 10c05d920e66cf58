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
// free_completed) and reserved (segment_alloc/map to segment_free/unmap)
// at once. PyTorch's trace records what each allocation asked for, so the
// first is the peak of requested bytes (torch.cuda.max_memory_allocated
// counts them rounded up to their blocks); the second is
// max_memory_reserved.
func (s *Snapshot) Peaks() (allocated, reserved int64) {
	var a, r int64
	for _, e := range s.Trace {
		switch e.Action {
		case Alloc:
			a += e.Size
		case FreeCompleted:
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
