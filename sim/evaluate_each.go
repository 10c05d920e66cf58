package sim

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// EvaluateBelowEach evaluates each of plans as EvaluateBelow(plans[i],
// opts, limit(i), firsts[i], workers) does, on one pool of workers
// goroutines: its replays (a staged plan's stages, in EvaluateBelow's
// order, or another plan whole) start in the plans' order, so that a
// worker starts plan i+1's while another finishes plan i's, where
// EvaluateBelow one plan at a time would leave it idle (search's Pareto
// front, walk.go). limit(i) is read as each of plan i's replays starts,
// so it may fall as earlier plans finish; a staged plan's report is nil
// when one of its stages reaches the limit read as that stage started,
// and Evaluate's report otherwise, field for field. A limit of 0 or less
// starts no more of plan i's replays, and its report is nil. done(i, rep,
// err) is called once for each plan, when the last of its replays ends,
// from the goroutine that ran it; limit and done are called from several
// goroutines at once. As plan i-1 ends, the replays of plan i running
// read plan i's limit again (Options.Below), and a plan whose limit is
// then 0 or less is stopped, its report nil. A worker starts plan i's replays only once every
// plan before i-a has ended, a the larger of workers-1 and 1: on 2
// workers, while plan i-1's last replays run, it starts plan i's,
// against a limit that plan i-1 may yet lower, but not plan i+1's (each
// against a limit older still: in search's front, a replay in full where
// a walk of one plan at a time would stop at the first stage). Once opts' context is done, no replay starts and
// each plan not finished ends with its error.
func EvaluateBelowEach(plans []*core.Plan, firsts []int64, opts core.Options, workers int, limit func(i int) int64, done func(i int, rep *replay.Report, err error)) {
	type job struct {
		i int
		s int64 // the stage to replay; -1: the plan whole
	}
	var jobs []job
	runs := make([]*stagedRun, len(plans))
	left := make([]atomic.Int32, len(plans))
	below := make([]atomic.Int64, len(plans)) // plan i's limit as it falls (Options.Below)
	// A plan whose limit falls to 0 while its replays run is dropped:
	// its replays are stopped (stop[i]) and its report is nil.
	dropped := make([]atomic.Bool, len(plans))
	stop := make([]func(), len(plans))
	wopts := make([]core.Options, len(plans)) // a plan whole's, with a context of its own
	whole := make([]*replay.Report, len(plans))
	wholeErr := make([]error, len(plans))
	for i, p := range plans {
		if err := p.Validate(); err != nil {
			done(i, nil, err)
			continue
		}
		if !Staged(p) || firsts[i] < 0 || firsts[i] >= p.Parallel.Norm().PP {
			ctx, cancel := context.WithCancel(orBackground(opts.Context))
			defer cancel()
			wopts[i], stop[i] = opts, cancel
			wopts[i].Context = ctx
			jobs = append(jobs, job{i, -1})
			left[i].Store(1)
			continue
		}
		r, err := newStagedRun(p, opts, firsts[i], workers, true)
		if err != nil {
			done(i, nil, err)
			continue
		}
		below[i].Store(math.MaxInt64)
		r.sopts.Below = &below[i]
		runs[i], stop[i] = r, func() { r.over.Store(true); r.stop() } // over first: the stages' errors are not the caller's
		defer r.stop()
		for _, s := range r.order {
			jobs = append(jobs, job{i, s})
		}
		left[i].Store(int32(len(r.order)))
	}
	run := func(j job, bufs *core.ProgramBuffers) {
		r := runs[j.i]
		if err := opts.Stopped(); err != nil {
			if r == nil {
				wholeErr[j.i] = err
			} else {
				r.errs[j.s] = err
			}
			return
		}
		l := limit(j.i)
		lowerLimit(&below[j.i], l)
		switch {
		case r == nil && l > 0:
			whole[j.i], wholeErr[j.i] = Evaluate(plans[j.i], wopts[j.i])
			if dropped[j.i].Load() {
				whole[j.i], wholeErr[j.i] = nil, nil
			}
		case r == nil: // nil, not replayed
		case l <= 0:
			r.over.Store(true)
		default:
			r.stage(j.s, l, bufs)
		}
	}
	finish := func(i int) {
		r := runs[i]
		if r == nil {
			done(i, whole[i], wholeErr[i])
			return
		}
		rep, err := r.report()
		done(i, rep, err)
	}
	// ended[i] is set as plan i's last replay ends; prefix is how many
	// plans from the first have all ended.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	ended := make([]bool, len(plans))
	prefix := 0
	for i := range plans {
		ended[i] = left[i].Load() == 0 // refused before any replay
	}
	for prefix < len(plans) && ended[prefix] {
		prefix++
	}
	ahead := max(workers-1, 1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(workers, 1), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := opts.Buffers.Get(opts.Names)
			defer opts.Buffers.Put(bufs)
			for {
				n := int(next.Add(1) - 1)
				if n >= len(jobs) {
					return
				}
				j := jobs[n]
				mu.Lock()
				for prefix < j.i-ahead { // see above
					cond.Wait()
				}
				mu.Unlock()
				run(j, bufs)
				if left[j.i].Add(-1) == 0 { // the plan's last replay: its stages' reports are all written
					finish(j.i)
					mu.Lock()
					for ended[j.i] = true; prefix < len(plans) && ended[prefix]; prefix++ {
					}
					// The limits of the plans that may be running
					// (Options.Below: their replays stop sooner), and
					// those dropped.
					for k := j.i + 1; k < len(plans) && k <= prefix+ahead; k++ {
						if ended[k] {
							continue
						}
						l := limit(k)
						lowerLimit(&below[k], l)
						if l <= 0 && !dropped[k].Swap(true) {
							stop[k]()
						}
					}
					cond.Broadcast()
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
}

// lowerLimit sets c to v if v is less.
func lowerLimit(c *atomic.Int64, v int64) {
	for {
		old := c.Load()
		if v >= old || c.CompareAndSwap(old, v) {
			return
		}
	}
}
