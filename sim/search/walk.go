package search

import (
	"context"
	"math"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// walk replays the layouts that survived the bounds, fastest first (kept
// is sorted by estimated step time, which equals the replay's), caching
// each report so that the top rows and the front share replays.
type walk struct {
	ctx     context.Context
	sp      Space
	base    *core.Plan
	layouts []layout
	valid   []int // layouts the plan accepts
	kept    []int // indexes into valid, fastest first
	ests    []estimate
	reports map[int]*replay.Report // by index into kept
	stats   *Stats
}

// replay replays the kept layouts idx (indexes into kept) not replayed
// yet, in parallel. A pipelined layout's stages are replayed its fullest
// by the bound first, and one that reaches limit bytes of device memory
// ends its replay: the layout needs at least that much (StageDominated).
func (w *walk) replay(idx []int, limit int64) error {
	var todo []int
	for _, k := range idx {
		if _, ok := w.reports[k]; !ok {
			todo = append(todo, k)
		}
	}
	reps := make([]*replay.Report, len(todo))
	errs := make([]error, len(todo))
	parallelFor(w.ctx, w.sp.Workers, len(todo), nil, func(i int) {
		k := todo[i]
		reps[i], errs[i] = sim.EvaluateBelow(w.plan(k), core.Options{Context: w.ctx}, limit, w.ests[w.kept[k]].fullest)
	})
	if err := w.ctx.Err(); err != nil {
		return err
	}
	for i, k := range todo {
		if errs[i] != nil {
			return errs[i]
		}
		if reps[i] == nil {
			w.stats.StageDominated++
			continue
		}
		w.reports[k] = reps[i]
		w.stats.Replayed++
		if reps[i].Fits {
			w.stats.Fit++
		}
		if w.sp.Progress != nil {
			w.sp.Progress(len(w.reports), len(w.reports)+1)
		}
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
		want = len(w.kept)
	}
	fitting, done := 0, 0
	for done < len(w.kept) && fitting < want {
		n := min(len(w.kept)-done, max(want-fitting, 1))
		wave := make([]int, n)
		for i := range wave {
			wave[i] = done + i
		}
		if err := w.replay(wave, math.MaxInt64); err != nil {
			return err
		}
		for _, k := range wave {
			if w.reports[k].Fits && fitting < want {
				fitting++
				res.Rows = append(res.Rows, w.row(k))
			}
		}
		done += n
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
// memory than every faster layout that fits; its memory bound says when
// it cannot (it is dominated and not replayed), else it is replayed.
func (w *walk) front(res *Result) error {
	best := int64(math.MaxInt64) // least memory of a fitting layout so far
	var front []int
	for i := 0; i < len(w.kept); {
		// A wave of the next layouts the bound does not rule out.
		var wave []int
		for ; i < len(w.kept) && len(wave) < frontWave; i++ {
			if w.ests[w.kept[i]].minDevice >= best {
				if _, ok := w.reports[i]; !ok {
					w.stats.Dominated++
				}
				continue
			}
			wave = append(wave, i)
		}
		if err := w.replay(wave, best); err != nil {
			return err
		}
		for _, k := range wave {
			r, ok := w.reports[k]
			if !ok || !r.Fits { // not replayed in full: a stage needs at least best
				continue
			}
			if used := DeviceMemory(r); used < best {
				best = used
				front = append(front, k)
			}
		}
	}
	// Of layouts as fast as each other, only the one needing least
	// memory is on the front (the walk kept the later, smaller one).
	for j, k := range front {
		if j+1 < len(front) && w.ests[w.kept[front[j+1]]].step == w.ests[w.kept[k]].step {
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
