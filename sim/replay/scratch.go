package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// Scratch keeps the lists of finished replays for the next ones to fill:
// the chunks of their tensors and their per-value and per-parameter
// state. A search replays hundreds of pipeline stages of similar sizes,
// each (and its Megatron first step) making these anew: a quarter of
// BenchmarkSearchLlama70B1024's bytes were replays' lists. A Scratch
// belongs to one goroutine at a time; its owner (a search's buffers,
// core.ProgramBuffers.Replay) hands it to one replay after another. The
// zero Scratch is empty; a nil *Scratch keeps nothing.
type Scratch struct {
	free []*stateLists
}

// stateLists are one replay's lists: newReplayState sets every element
// it hands out (fill, clear), so what a finished replay left in them is
// never read.
type stateLists struct {
	valT, gradT, holds, rLast, paramGrad []int32
	done, gradFresh, kept, redone        []bool
	chunks                               [][]liveTensor // emptied: no block of a finished allocator is kept alive
	slabs                                alloc.Slabs    // the allocator's blocks and segments
	// The replay's reading of its program (newReplayIn: analyse), kept
	// by the replay that read it, not by the siblings that share it
	// (a first step's, recycled before it).
	last, paramLast []int32
	saved           []bool
	regionIn        [][]core.Value
}

// take returns lists for a replay: a finished replay's, or new ones.
func (s *Scratch) take() *stateLists {
	if s == nil || len(s.free) == 0 {
		return &stateLists{}
	}
	l := s.free[len(s.free)-1]
	s.free[len(s.free)-1] = nil
	s.free = s.free[:len(s.free)-1]
	return l
}

// put keeps l for the next replay.
func (s *Scratch) put(l *stateLists) {
	if s != nil && l != nil {
		s.free = append(s.free, l)
	}
}

// sized is xs with length n, its array reused when it has room; its
// elements are the caller's to set.
func sized[T any](xs []T, n int) []T {
	if cap(xs) < n || xs == nil { // nil: make's empty list, as without a Scratch
		return make([]T, n)
	}
	return xs[:n]
}

// Recycle hands r's lists back to the Scratch they came from for the
// next replay, once nothing reads r any more (its report keeps none of
// them, and neither does the time model's StageTime, which drops its
// program's redone list: timing's summarise); r must not be used after.
// A replay made without a Scratch keeps its lists.
func (r *Replay) Recycle() {
	if r == nil || r.lists == nil {
		return
	}
	l, s := r.lists, r.scratch
	l.valT, l.gradT, l.holds, l.rLast, l.paramGrad = r.valT, r.gradT, r.holds, r.rLast, r.paramGrad
	l.done, l.gradFresh, l.kept, l.redone = r.done, r.gradFresh, r.kept, r.Redone
	l.chunks = r.live.empty()
	if r.readsOwn {
		l.last, l.paramLast, l.saved, l.regionIn = r.last, r.paramLast, r.Saved, r.regionIn
	}
	if r.traced == nil { // a trace's map holds the blocks: its allocator keeps them
		l.slabs = r.alloc.Slabs()
	}
	*r = Replay{}
	s.put(l)
}
