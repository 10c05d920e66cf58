package search

import (
	"container/heap"
	"context"
	"math"
	"slices"
	"sync"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// walk replays the layouts that survived the bounds, fastest first (by
// estimated step time, which equals the replay's), caching each report
// so that the top rows and the front share replays.
type walk struct {
	ctx     context.Context
	names   *core.NameTable  // the run's copied blocks' names (core.NameTable)
	pool    *core.BufferPool // the lists its replays lower into (core.BufferPool)
	sp      Space
	base    *core.Plan
	layouts []layout
	valid   []int // layouts the plan accepts
	// kept is the layouts of the order so far (indexes into valid),
	// fastest first; queue the others, by step time or a lower bound of
	// it; total their number.
	kept  []int
	queue *stepQueue
	total int
	exact func(j int) float64 // the step time of layout valid[j]
	// timedReport is the full replay exact made of layout valid[j] to
	// time it (a layout with its parameters on the host), or nil.
	timedReport func(j int) *replay.Report
	// timed holds step times worked out ahead (timeAhead), by index into
	// valid, until the walk comes to them.
	timed   map[int]float64
	ests    []estimate
	reports map[int]*replay.Report // by index into kept
	stats   *Stats
	hosts   *hostChecks // train(host_memory=)'s check of each replay
}

// stepEntry is a layout waiting in the walk's order: valid[j], by its
// step time (exact) or a lower bound of it.
type stepEntry struct {
	step      float64
	exact     bool
	minDevice int64
	j         int
}

// stepQueue is a heap of entries: by step, a bound before a time (a
// layout whose bound equals a time may be as fast), then by memory bound
// and index, as a stable sort of the times and memory bounds orders them.
type stepQueue []stepEntry

func (q stepQueue) Len() int { return len(q) }
func (q stepQueue) Less(a, b int) bool {
	x, y := &q[a], &q[b]
	switch {
	case x.step != y.step:
		return x.step < y.step
	case x.exact != y.exact:
		return !x.exact
	case x.minDevice != y.minDevice:
		return x.minDevice < y.minDevice
	}
	return x.j < y.j
}
func (q stepQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *stepQueue) Push(x any)   { *q = append(*q, x.(stepEntry)) }
func (q *stepQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// has says whether the order has a layout at position i, taking more
// from the queue as needed. A layout that comes up by its lower bound is
// timed and queued again by its time, unless its memory bound is at
// least best: a layout that fits and needs no more than best bytes is
// then faster than it (it came up earlier), so it is dominated, counted
// and dropped, as the walk would drop it at its own time (best only
// falls).
func (w *walk) has(i int, best int64) bool {
	for len(w.kept) <= i && w.queue.Len() > 0 {
		e := heap.Pop(w.queue).(stepEntry)
		switch {
		case e.exact:
			w.kept = append(w.kept, e.j)
		case e.minDevice >= best:
			w.stats.Dominated++
		default:
			step, ok := w.timed[e.j]
			if !ok {
				step = w.timeAhead(e, best)
			}
			delete(w.timed, e.j)
			w.ests[e.j].step = step
			e.step, e.exact = step, true
			heap.Push(w.queue, e)
		}
	}
	return i < len(w.kept)
}

// timeAhead returns the step time of e, just popped, and works out on
// the workers, beside it, those of the next layouts in the queue that has
// would time now (by a lower bound, not dominated at best), into timed.
// They go back into the queue as they were: the queue is ordered by a
// total order, so it pops the same entries in the same order, and has
// does what it would have done, with a time it need not compute (one it
// never asks for, of a layout dominated by then, is work lost, not a
// different result).
func (w *walk) timeAhead(e stepEntry, best int64) float64 {
	if w.sp.Workers <= 1 {
		return w.exact(e.j)
	}
	batch := []stepEntry{e}
	var back []stepEntry
	for len(batch) < w.sp.Workers*timeAheadPerWorker && w.queue.Len() > 0 {
		f := heap.Pop(w.queue).(stepEntry)
		back = append(back, f)
		if _, ok := w.timed[f.j]; !f.exact && f.minDevice < best && !ok {
			batch = append(batch, f)
		}
	}
	for _, f := range back {
		heap.Push(w.queue, f)
	}
	steps := make([]float64, len(batch))
	parallelFor(w.ctx, w.sp.Workers, len(batch), nil, func(i int) {
		steps[i] = w.exact(batch[i].j)
	})
	if w.ctx.Err() != nil { // stopped before the end: e alone (the walk stops next)
		return w.exact(e.j)
	}
	if w.timed == nil {
		w.timed = map[int]float64{}
	}
	for i, f := range batch[1:] {
		w.timed[f.j] = steps[i+1]
	}
	return steps[0]
}

// hasFree is has for a caller that does not yet know the best it will
// walk the layout at, only that it is no more than best: it takes from
// the queue only what has would take at any such best (a layout's time,
// a time worked out ahead, timed, or a layout dominated at best already),
// and stops at a layout has might time.
func (w *walk) hasFree(i int, best int64) bool {
	for len(w.kept) <= i && w.queue.Len() > 0 {
		e := (*w.queue)[0]
		switch _, timed := w.timed[e.j]; {
		case e.exact:
		case e.minDevice >= best: // has drops it at best or less
		case !timed:
			return false
		}
		w.has(len(w.kept), best)
	}
	return i < len(w.kept)
}

// aheadPerWorker is how many layouts to replay per worker a wave of the
// front's walk holds at most.
const aheadPerWorker = 4

// timeAheadPerWorker is how many step times timeAhead works out per
// worker at a time.
const timeAheadPerWorker = 4

// evaluate replays the kept layouts idx (indexes into kept) not
// replayed yet on the workers, one pool of their replays (sim.EvaluateBelowEach): a
// pipelined layout's stages, its fullest by the bound first, or a layout
// whole. A stage that reaches the layout's limit ends its replay with a
// nil report: the layout needs at least that much. The limit is limit;
// with lower, as each replay starts, it is also the least device memory
// of the layouts before it in idx whose replays have ended (or were
// replayed before) and fit, and a
// layout whose memory bound is at least its limit is not replayed (a nil
// report). A walk of one layout at a time has a best no larger at the
// layout (front): a nil report is one it finds dominated.
func (w *walk) evaluate(idx []int, limit int64, lower bool) ([]*replay.Report, error) {
	reps := make([]*replay.Report, len(idx))
	errs := make([]error, len(idx))
	ended := make([]bool, len(idx))
	var mu sync.Mutex // reps, errs and ended, as replays end
	var plans []*core.Plan
	var firsts []int64
	var at []int // plans[n] is kept layout idx[at[n]]
	for i, k := range idx {
		if r, ok := w.reports[k]; ok { // replayed already (by top)
			reps[i], ended[i] = r, true
			continue
		}
		if r := w.timedReport(w.kept[k]); r != nil { // replayed in full to time it: what EvaluateBelow would find, or more
			reps[i], ended[i] = r, true
			continue
		}
		plans, firsts, at = append(plans, w.plan(k)), append(firsts, w.ests[w.kept[k]].fullest), append(at, i)
	}
	limitOf := func(n int) int64 {
		if !lower {
			return limit
		}
		i := at[n]
		mu.Lock()
		defer mu.Unlock()
		l := limit
		for j := range i {
			if ended[j] && reps[j] != nil && reps[j].Fits {
				l = min(l, DeviceMemory(reps[j]))
			}
		}
		if w.ests[w.kept[idx[i]]].minDevice >= l {
			return 0 // dominated: not replayed
		}
		return l
	}
	opts := core.Options{Context: w.ctx, Names: w.names, Buffers: w.pool}
	sim.EvaluateBelowEach(plans, firsts, opts, w.sp.Workers, limitOf, func(n int, r *replay.Report, err error) {
		r, err = w.hosts.evaluate(plans[n], opts, func(*core.Plan) (*replay.Report, error) { return r, err })
		mu.Lock()
		defer mu.Unlock()
		i := at[n]
		reps[i], errs[i], ended[i] = r, err, true
	})
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return reps, nil
}

// replayed records kept layout k's full replay.
func (w *walk) replayed(k int, r *replay.Report) {
	w.reports[k] = r
	w.stats.Replayed++
	if r.Fits {
		w.stats.Fit++
	}
	if w.hosts.failed(r) {
		w.stats.HostShort++
	}
	if w.sp.Progress != nil {
		w.sp.Progress(len(w.reports), len(w.reports)+1)
	}
}

// replay replays in full the kept layouts idx not replayed yet, in
// parallel.
func (w *walk) replay(idx []int) error {
	var todo []int
	for _, k := range idx {
		if _, ok := w.reports[k]; !ok {
			todo = append(todo, k)
		}
	}
	reps, err := w.evaluate(todo, math.MaxInt64, false)
	if err != nil {
		return err
	}
	for i, k := range todo {
		w.replayed(k, reps[i])
	}
	return nil
}

// plan is kept layout k's plan.
func (w *walk) plan(k int) *core.Plan {
	return w.sp.plan(w.base, w.layouts[w.valid[w.kept[k]]])
}

// row is kept layout k as a result row.
func (w *walk) row(k int) Row {
	l := w.layouts[w.valid[w.kept[k]]]
	return Row{Plan: w.plan(k), Report: w.reports[k], Sharding: w.sp.Sharding[l.sharding]}
}

// top replays the fastest layouts until Top of them fit (all when Top is
// 0), in waves as large as the layouts still wanted, so that the counts
// do not depend on the machine.
func (w *walk) top(res *Result) error {
	want := w.sp.Top
	if want <= 0 {
		want = w.total
	}
	fitting, done := 0, 0
	for fitting < want && w.has(done, math.MaxInt64) {
		var wave []int
		for i := done; i < done+max(want-fitting, 1) && w.has(i, math.MaxInt64); i++ {
			wave = append(wave, i)
		}
		if err := w.replay(wave); err != nil {
			return err
		}
		for _, k := range wave {
			if w.reports[k].Fits && fitting < want {
				fitting++
				res.Rows = append(res.Rows, w.row(k))
			}
		}
		done += len(wave)
	}
	return nil
}

// DeviceMemory is the device memory of a report's fullest GPU: the
// memory axis of the Pareto front.
func DeviceMemory(r *replay.Report) int64 {
	used := r.DeviceUsed
	for _, rr := range r.Ranks {
		used = max(used, rr.DeviceUsed)
	}
	return used
}

// front finds the Pareto front of step time and device memory. Walking
// fastest first, a layout can be on the front only if it needs less
// memory than every faster layout that fits: its memory bound says when
// it cannot (Dominated), or, for a pipelined layout, one of its stages
// replayed in turn (StageDominated); else it is replayed in full.
//
// The walk takes the layouts a wave at a time, one per worker, replayed
// in parallel against the least memory of the waves before; then it goes
// through the wave in order as a walk of one layout at a time would, with
// the least memory so far. A replay that a wave's earlier layout made moot
// is counted as that walk would count it, so the front and every count
// are the same on any number of cores. A pipelined layout still to
// replay is a wave of its own: its stages already run on every worker
// (sim.EvaluateBelow), and against the least memory of every layout
// before it they stop soonest, where in a wave it was often replayed in
// full and then found dominated by the wave's earlier layout (the 70B
// search of BenchmarkSearchLlama70B1024: 7 of the front's 45 full
// pipelined replays, 109 of its 894 stage replays). The layouts after
// the wave that the walk has whatever best is (hasFree) join it on one
// pool of replays (evaluate): as each ends, the limit of the ones after
// it falls to what a walk of one at a time would give them, or lower
// (its memory when it fits), so that a worker the pipelined layout's
// last stages leave idle replays the next layout's stages (on 2 cores,
// BenchmarkSearchLlama70B1024's front replays as many stages in full,
// 642, and wastes about 10 starts).
// asFast reports whether a replayed step time a is as fast as b: not
// slower by more than sameTime. The walk takes layouts in the order of
// its estimates, which can differ from the replays' step times in their
// last bits (the same terms summed in another order, 1e-15 of a step),
// so replays that tie (a step its exposed communication paces, whatever
// the checkpointing) may be walked in either order; as fast is what
// decides the front, whichever came first.
func asFast(a, b float64) bool { return a <= b*(1+sameTime) }

// sameTime is how much slower a step may be and still be as fast: far
// above the rounding of the estimates, far below any cost memsh prices.
const sameTime = 1e-9

func (w *walk) front(res *Result) error {
	best := int64(math.MaxInt64) // least memory of a fitting layout so far
	var front []int
	for i := 0; w.has(i, best); {
		// A wave of the next layouts the bound does not rule out.
		var wave, todo []int
		for ; len(wave) < max(w.sp.Workers, 1) && w.has(i, best); i++ {
			_, done := w.reports[i]
			if w.ests[w.kept[i]].minDevice >= best {
				if !done {
					w.stats.Dominated++
				}
				continue
			}
			alone := !done && sim.Staged(w.plan(i))
			if alone && len(wave) > 0 {
				break // a wave of its own, next
			}
			wave = append(wave, i)
			if !done {
				todo = append(todo, i)
			}
			if alone {
				i++
				break
			}
		}
		// The layouts after them that the walk has whatever best is
		// (hasFree), replayed beside them: a worker that one of them
		// leaves idle starts the next one's replays, with a limit that
		// falls as the wave's layouts before it end (evaluate).
		for ; len(todo) < max(w.sp.Workers, 1)*aheadPerWorker && w.hasFree(i, best); i++ {
			_, done := w.reports[i]
			if w.ests[w.kept[i]].minDevice >= best {
				if !done {
					w.stats.Dominated++
				}
				continue
			}
			wave = append(wave, i)
			if !done {
				todo = append(todo, i)
			}
		}
		reps, err := w.evaluate(wave, best, true)
		if err != nil {
			return err
		}
		fresh := map[int]*replay.Report{}
		for j, k := range wave {
			if _, done := w.reports[k]; !done {
				fresh[k] = reps[j]
			}
		}
		for _, k := range wave {
			r, isNew := fresh[k]
			switch {
			case !isNew: // replayed by top
				r = w.reports[k]
			case w.ests[w.kept[k]].minDevice >= best:
				w.stats.Dominated++
				continue
			case r == nil || (sim.Staged(w.plan(k)) && DeviceMemory(r) >= best):
				w.stats.StageDominated++
				continue
			default:
				w.replayed(k, r)
			}
			if !r.Fits {
				continue
			}
			if used := DeviceMemory(r); used < best {
				best = used
				front = append(front, k)
			}
		}
	}
	// Of layouts as fast as each other, only the one needing least
	// memory is on the front: each later layout of front needs less
	// memory, so one is dropped when a later one's replay is as fast.
	for j, k := range front {
		if slices.ContainsFunc(front[j+1:], func(l int) bool {
			return asFast(w.reports[l].Time.StepSeconds, w.reports[k].Time.StepSeconds)
		}) {
			continue
		}
		row := w.row(k)
		row.Front = true
		res.Front = append(res.Front, row)
	}
	for i := range res.Rows {
		for _, f := range res.Front {
			if f.Report == res.Rows[i].Report {
				res.Rows[i].Front = true
			}
		}
	}
	return nil
}
