package sim

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// evaluatePipeline replays every stage of a pipelined plan; the report is
// the stage that uses the most device memory, with every stage in Ranks.
// It first rewrites a DeepSpeed plan's precision (deepspeedPrecision). It
// reports ok=false for plans it does not handle (no pipeline, or one
// stage's own replay).
func evaluatePipeline(plan *core.Plan, opts core.Options) (*replay.Report, bool, error) {
	if q, ok := plan.DeepspeedPrecision(); ok {
		rep, err := Evaluate(q, opts)
		return rep, true, err
	}
	par := plan.Parallel.Norm()
	if par.PP <= 1 || plan.PipeStage != nil {
		return nil, false, nil
	}
	rep, err := evaluateStages(plan, opts, math.MaxInt64, 0, 1)
	return rep, true, err
}

// EvaluateBelow is Evaluate for a caller that needs the report only when
// the plan's fullest GPU uses less than limit bytes of device memory
// (search's Pareto front). A pipelined plan's stages are replayed stage
// first first, the others beside it and after it, on workers goroutines
// (each stage's replay is its own), and once a stage uses at least limit
// bytes it stops the others and returns a nil report: Evaluate's report
// would say as much or more of its fullest GPU. Otherwise the report is Evaluate's, field for
// field; a stage's error is returned. A plan without a pipeline, or
// whose stages Evaluate replays another way (a DeepSpeed precision
// rewrite, a checkpoint budget to solve first), is evaluated whole.
func EvaluateBelow(plan *core.Plan, opts core.Options, limit, first int64, workers int) (*replay.Report, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if !Staged(plan) || first < 0 || first >= plan.Parallel.Norm().PP {
		return Evaluate(plan, opts)
	}
	return evaluateStages(plan, opts, limit, first, workers)
}

// Staged says whether EvaluateBelow replays plan stage by stage, and so
// may stop before the last: a pipelined plan whose stages Evaluate
// replays as they are.
func Staged(plan *core.Plan) bool {
	_, ds := plan.DeepspeedPrecision()
	return !ds && plan.Checkpoint.Mode != "budget" && plan.Parallel.Norm().PP > 1 && plan.PipeStage == nil
}

// evaluateStages replays the stages of a pipelined plan, stage first
// first, the others beside it on workers goroutines (runStages), and
// composes the pipeline's report; nil when a stage uses at least limit bytes of device
// memory.
func evaluateStages(plan *core.Plan, opts core.Options, limit, first int64, workers int) (*replay.Report, error) {
	if opts.Names == nil {
		// A table of copied blocks' names for the stages' lowerings: a
		// stage's micro-batch program (the time model's) copies its
		// blocks under the paths of the stage program's first micro-batch
		// and takes their names from it instead of writing them again
		// (BenchmarkEvaluateLlama70B3D: 3.25 -> 3.07 MB an op; 70.5 ->
		// 64.1 M instructions, the collector's work with them). The same
		// programs, string for string (core.NameTable).
		opts.Names = &core.NameTable{}
	}
	r, err := newStagedRun(plan, opts, first, workers, workers > 1 && limit < math.MaxInt64)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	if workers <= 1 {
		bufs := opts.Buffers.Get(opts.Names)
		defer opts.Buffers.Put(bufs)
		for _, s := range r.order {
			if r.stage(s, limit, bufs); r.errs[s] != nil || r.over.Load() {
				break
			}
		}
	} else {
		runStages(r.order[0], r.order[1:], workers, &r.over, opts, func(s int64, bufs *core.ProgramBuffers) { r.stage(s, limit, bufs) })
	}
	return r.report()
}

// runStages runs stage(s) for the stages first and rest on workers
// goroutines, first first and the others beside it: a stage that
// reaches the limit sets over, and no stage starts after it (stage
// stops the ones running). Beside stage first, a second worker would
// otherwise wait (the search's front replays a pipelined layout alone,
// walk.go); what it replays in vain when first reaches the limit is at
// most the time first took. Each worker hands stage a ProgramBuffers of
// its own (from opts.Buffers, names kept in opts.Names).
func runStages(first int64, rest []int64, workers int, over *atomic.Bool, opts core.Options, stage func(s int64, bufs *core.ProgramBuffers)) {
	next := make(chan int64)
	var wg sync.WaitGroup
	for range min(workers, len(rest)+1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := opts.Buffers.Get(opts.Names)
			defer opts.Buffers.Put(bufs)
			for s := range next {
				stage(s, bufs)
			}
		}()
	}
	next <- first
	for _, s := range rest {
		if over.Load() {
			break
		}
		next <- s
	}
	close(next)
	wg.Wait()
}

// orBackground is ctx, or the background context for none.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// stagePlans are the stages of plan's pipeline as evaluatePipeline
// replays them.
func stagePlans(plan *core.Plan) ([]*core.Plan, error) {
	par := plan.Parallel.Norm()
	split, err := core.SplitStages(plan.Model, par)
	if err != nil {
		return nil, err
	}
	m := plan.MicroBatches()
	stages := make([]*core.Plan, par.PP)
	for s := range par.PP {
		n := core.Inflight(par, s, m)
		q := *plan
		q.Parallel.MicroBatches = m
		q.PipeStage = &core.StageSpec{Stage: s, Inflight: n, Chunks: core.StageChunks(par, s, n), Split: split}
		// In the steady state of the schedule a backward has run before
		// the peak forward, so gradients exist (accumulated over
		// micro-batches).
		q.GradAccum = 1
		if m*par.VirtualStages > n {
			q.GradAccum = m
		}
		stages[s] = &q
	}
	return stages, nil
}

func joinList(xs []string) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}
