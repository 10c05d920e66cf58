package sim

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// stagedRun is one pipelined plan's stages being replayed
// (evaluateStages, EvaluateBelowEach): each stage's report and time, set
// by the goroutine that replays it, and whether one reached its limit.
type stagedRun struct {
	plan   *core.Plan
	opts   core.Options // the caller's
	sopts  core.Options // the stages': a context of their own when they can be stopped
	stop   func()       // stops the stages running (stage calls it when one reaches its limit)
	par    core.Parallelism
	stages []*core.Plan
	// order is the stages in the order they start: first first, then, on
	// more than one worker, the last stage (it holds the fewest
	// micro-batches in flight, so it is the shortest replay, and the
	// least lost when first reaches the limit) and the others, the most
	// in flight first; on one worker, the others in turn.
	order []int64
	ranks []*replay.Report
	times []*timing.StageTime
	errs  []error
	over  atomic.Bool // a stage reached its limit: the others need not run
}

// newStagedRun is plan's stages to replay, stage first first, on workers
// goroutines. With stoppable, a stage running beside one that reaches
// its limit is stopped: its context ends, and the error that makes it
// return is not the caller's.
func newStagedRun(plan *core.Plan, opts core.Options, first int64, workers int, stoppable bool) (*stagedRun, error) {
	stages, err := stagePlans(plan)
	if err != nil {
		return nil, err
	}
	par := plan.Parallel.Norm()
	r := &stagedRun{plan: plan, opts: opts, sopts: opts, stop: func() {}, par: par, stages: stages,
		ranks: make([]*replay.Report, par.PP), times: make([]*timing.StageTime, par.PP), errs: make([]error, par.PP)}
	if stoppable {
		ctx, cancel := context.WithCancel(orBackground(opts.Context))
		r.sopts.Context, r.stop = ctx, cancel
	}
	var rest []int64
	for s := range par.PP {
		if s != first {
			rest = append(rest, s)
		}
	}
	if last := par.PP - 1; workers > 1 && first != last {
		rest = append([]int64{last}, rest[:len(rest)-1]...)
	}
	r.order = append([]int64{first}, rest...)
	return r, nil
}

// stage replays stage s, lowering its program into bufs, unless a stage
// already reached its limit; one that uses at least limit bytes of
// device memory, or Options.Below's as it ends, sets over and stops the
// others.
func (r *stagedRun) stage(s, limit int64, bufs *core.ProgramBuffers) {
	if r.over.Load() {
		return
	}
	par, split := r.par, r.stages[0].PipeStage.Split
	n := r.stages[s].PipeStage.Inflight
	rep, st, err := evaluateUnder(r.stages[s], r.sopts, limit, bufs)
	if err != nil {
		if r.over.Load() && r.opts.Stopped() == nil { // stopped by stop
			return
		}
		r.errs[s] = err
		return
	}
	if b := r.sopts.Below; b != nil { // lowered while the stage ran
		limit = min(limit, b.Load())
	}
	if rep == nil || rep.DeviceUsed >= limit {
		r.over.Store(true)
		r.stop()
		return
	}
	r.times[s] = st
	var layers []string
	for _, g := range core.RankChunks(par, s) {
		lo, hi := split.ChunkBlocks(g)
		switch {
		case hi == lo:
			layers = append(layers, "none")
		case hi == lo+1:
			layers = append(layers, fmt.Sprintf("%d", lo))
		default:
			layers = append(layers, fmt.Sprintf("%d-%d", lo, hi-1))
		}
	}
	what := "blocks " + joinList(layers)
	for _, g := range core.RankChunks(par, s) {
		switch g {
		case 0:
			what += " and the layers before them"
		case split.Chunks - 1:
			what += ", the layers after them, the output layer and the loss"
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("pipeline stage %d of %d (%s schedule): %s; %d of %d micro-batch forwards in flight at the peak",
		s, par.PP, par.Schedule, what, n, r.plan.MicroBatches()*par.VirtualStages))
	r.ranks[s] = rep
}

// report composes the pipeline's report once every stage has run (or
// none is left to run): the stage first's error first, as a walk of one
// stage at a time returns it, then any other; nil when a stage reached
// its limit.
func (r *stagedRun) report() (*replay.Report, error) {
	if err := r.errs[r.order[0]]; err != nil {
		return nil, err
	}
	for _, err := range r.errs {
		if err != nil {
			return nil, err
		}
	}
	if r.over.Load() {
		return nil, nil
	}
	worst := 0
	for s, rep := range r.ranks {
		if rep.DeviceUsed > r.ranks[worst].DeviceUsed {
			worst = s
		}
	}
	top := *r.ranks[worst]
	top.Ranks = r.ranks
	top.TrainableParams = 0
	for _, rep := range r.ranks {
		top.TrainableParams += rep.TrainableParams // each stage counts its own layers
	}
	timing.PipelineTime(r.plan, &top, r.ranks, r.times) // the step over all stages
	return &top, nil
}
