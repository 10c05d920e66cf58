package sim

import (
	"fmt"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
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
	stages, err := stagePlans(plan)
	if err != nil {
		return nil, true, err
	}
	split := stages[0].PipeStage.Split
	m := plan.MicroBatches()
	var ranks []*replay.Report
	var times []*timing.StageTime
	worst := 0
	for s := int64(0); s < par.PP; s++ {
		n := stages[s].PipeStage.Inflight
		rep, st, err := evaluate(stages[s], opts)
		if err != nil {
			return nil, true, err
		}
		times = append(times, st)
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
			s, par.PP, par.Schedule, what, n, m*par.VirtualStages))
		ranks = append(ranks, rep)
		if rep.DeviceUsed > ranks[worst].DeviceUsed {
			worst = int(s)
		}
	}
	top := *ranks[worst]
	top.Ranks = ranks
	top.TrainableParams = 0
	for _, r := range ranks {
		top.TrainableParams += r.TrainableParams // each stage counts its own layers
	}
	timing.PipelineTime(plan, &top, ranks, times) // the step over all stages
	return &top, true, nil
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

// StageDeviceUsed replays stage s of a pipelined plan alone and returns
// the device memory it uses, which is Evaluate's Ranks[s].DeviceUsed (the
// same replay of the same stage plan): a caller that needs to know only
// whether the fullest GPU reaches some memory can replay one stage
// instead of every one (search's Pareto front). ok is false for plans
// whose stages Evaluate does not replay this way: no pipeline, a
// DeepSpeed precision rewrite or a checkpoint budget to solve first.
func StageDeviceUsed(plan *core.Plan, s int64, opts core.Options) (used int64, ok bool, err error) {
	if err := plan.Validate(); err != nil {
		return 0, false, err
	}
	par := plan.Parallel.Norm()
	if _, ds := plan.DeepspeedPrecision(); ds || plan.Checkpoint.Mode == "budget" || par.PP <= 1 || plan.PipeStage != nil ||
		s < 0 || s >= par.PP {
		return 0, false, nil
	}
	stages, err := stagePlans(plan)
	if err != nil {
		return 0, false, err
	}
	q := stages[s]
	if err := q.Validate(); err != nil {
		return 0, false, err
	}
	// evaluate's steps but the time model and the graph notes, which
	// leave the device memory as it is
	prog, err := q.LowerProgram()
	if err != nil {
		return 0, false, err
	}
	if err := q.CheckFirstStep(prog); err != nil {
		return 0, false, err
	}
	r, err := replay.Run(prog, q, opts)
	if err != nil {
		return 0, false, err
	}
	if err := r.Settle(); err != nil { // paged optimizer state can change it
		return 0, false, err
	}
	return r.Report().DeviceUsed, true, nil
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
