package timing

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// The pipeline part of the time model (Narayanan et al. 2021,
// arXiv:2104.04473, section 2.2). Each stage does m micro-batches of
// forward and backward; a micro-batch takes T_s on stage s (compute plus
// its exposed communication). With uniform stages the step is
// (m + (p-1)/v) x T: the 1F1B bubble is (p-1)/m of the ideal time and the
// interleaved schedule, with v model chunks per GPU, divides it by v. With
// stages of different cost (the first holds the embedding, the last the
// output layer and the loss) the slowest stage sets the pace of the steady
// state and the others fill and drain the pipeline:
//
//	step = m x max_s T_s + (sum_s T_s - max_s T_s) / v + max_s tail_s
//
// which is the paper's formula for uniform stages. tail_s is stage s's
// once-per-step work after its last backward (exposed data-parallel
// reduction, optimizer step, host transfers); the step ends with the
// slowest.

// stageTime is a pipeline stage's share of the time model, kept on its
// report until pipelineTime composes the step.
type StageTime struct {
	Work *GpuWork
	Time gpuTime
	// A replayed stage's summary of its micro-batch program (StepTime
	// makes it and drops the program, so that the caller may reuse its
	// lists for the next stage): W (weightGrad) and the module rows of
	// its micro-batches (moduleRows over the per-micro-batch time, paid
	// passes times), which pipelineTime composes. ops says they were
	// made; the search's estimate has no ops (W 0, no module rows).
	ops     bool
	wgrad   float64
	modules []replay.ModuleTime
}

// summarise keeps what the pipeline's composition reads of st's program
// (W and the module rows of its micro-batches) and drops the program.
// mbRows are microBatchRows of w and st's time at w.M passes, which
// StepTimeIn made for the stage's own report: the rows themselves when
// the schedule passes w.M times, as all but DualPipe do (the same
// function of the same figures; made again, they were a twentieth of
// BenchmarkEvaluateLlama70B3D's time).
func (st *StageTime) summarise(par core.Parallelism, mbRows []replay.ModuleTime) {
	w := st.Work
	if w.prog == nil {
		return
	}
	st.ops = true
	st.wgrad = weightGrad(w)
	if n := passes(par, w); n == w.M {
		st.modules = slices.Clone(mbRows) // the report keeps mbRows
	} else {
		st.modules = moduleRows(w, gpuTime{PerMB: st.Time.PerMB, Tail: nil}, float64(n))
	}
	w.prog, w.costs, w.redone, w.scratch = nil, nil, nil, nil
}

// stageMicroBatch lowers one micro-batch through each of the stage's model
// chunks (the stage program itself holds the micro-batches in flight at
// the memory peak, which is not the unit of time). When the stage holds
// just that at its peak (the last stage of 1F1B, which runs each
// micro-batch's backward right after its forward), the plan is the same
// and so is its lowering: prog, the stage's program, lowered from it and
// left as lowered by the replay (sim's TestLowersAlike), is returned.
// Otherwise the program is lowered into bufs' lists (nil: lists of its
// own; core.Plan.LowerProgramInto makes the same program either way).
func stageMicroBatch(p *core.Plan, prog *core.Program, bufs *core.ProgramBuffers) (*core.Program, error) {
	st := p.PipeStage
	chunks := core.RankChunks(p.Parallel, st.Stage)
	if st.Inflight == int64(len(chunks)) && slices.Equal(st.Chunks, chunks) {
		return prog, nil
	}
	q := *p
	q.PipeStage = &core.StageSpec{Stage: st.Stage, Inflight: int64(len(chunks)), Chunks: chunks, Split: st.Split}
	return q.LowerProgramInto(core.ProgramSize{}, bufs)
}

// stageTransfers counts the activations stage s receives and sends per
// micro-batch (one per model chunk, except into the first chunk and out
// of the last).
func StageTransfers(par core.Parallelism, s int64) (recv, send int64) {
	last := par.PP*par.VirtualStages - 1
	for c := range core.ChunksPerRank(par) {
		g := core.RankChunk(par, s, c)
		if g > 0 {
			recv++
		}
		if g < last {
			send++
		}
	}
	return recv, send
}

// Zero-bubble schedules and DualPipe (core/pipeline_schedule.go) shrink
// the fill and drain. With F, B and W a stage's forward, whole backward
// (recompute included) and weight-gradient time per micro-batch, and
// T = F + B plus its exposed communication (DeepSeek-V3, arXiv:2412.19437,
// Table 2, and Qi et al. 2023, arXiv:2401.10241):
//
//   - zb-h1: (p-1)(F + B - 2W), summed over the stages other than the
//     slowest as above: each deferred weight gradient fills the bubble;
//   - zb-v: the ZB-H2 bound (p-1)(F + B - 3W) over chunks of half a stage,
//     zero when F, the input gradient and W take the same time (the
//     zero-bubble repository's table);
//   - dualpipe: (p/2 - 1)(F&B + B - 3W) per chunk, F&B taken as F + B (the
//     overlap hides communication, not compute), averaged over the stages;
//     each stage runs m/2 micro-batches through each of its two stages.
//
// W is the weight-gradient GEMMs' time: each matmul with a trainable
// weight computes its weight gradient in backward with the forward's
// FLOPs and shapes, so W is those matmuls' forward time.

// weightGrad is W of a stage's micro-batch (see above), seconds.
func weightGrad(w *GpuWork) float64 {
	if w.prog == nil || len(w.costs) != len(w.prog.Ops) {
		return 0
	}
	var t float64
	for i := range w.prog.Ops {
		op := &w.prog.Ops[i]
		if op.Kind != "matmul" && op.Kind != "grouped_matmul" {
			continue
		}
		for _, pi := range op.Params {
			if w.prog.Params[pi].Trainable {
				t += w.costs[i].Fwd
				break
			}
		}
	}
	return t
}

// passes is the number of times a stage runs its micro-batch program per
// step: m, or m/2 under DualPipe (its program holds both of its stages).
func passes(par core.Parallelism, w *GpuWork) int64 {
	if par.Schedule == "dualpipe" {
		return w.M / 2
	}
	return w.M
}

// pipelineStep composes the step from the stages' times (the formulas
// above): the step, the bubble, the slowest stage and the stage with the
// longest tail. slow is nil when stages is empty.
func pipelineStep(par core.Parallelism, stages []*StageTime) (step, bubble float64, slow, tail *StageTime) {
	for _, st := range stages {
		if slow == nil || st.Time.MbSec > slow.Time.MbSec {
			slow = st
		}
		if tail == nil || st.Time.TlSec > tail.Time.TlSec {
			tail = st
		}
	}
	if slow == nil {
		return 0, 0, nil, nil
	}
	p := float64(par.PP)
	for _, st := range stages {
		t, b, w := st.Time.MbSec, st.Time.BwdRec, st.wgrad
		switch par.Schedule {
		case "zb-h1":
			if st != slow {
				bubble += max(0, t-2*w)
			}
		case "zb-v":
			if st != slow {
				bubble += max(0, t-3*w) / 2
			}
		case "dualpipe":
			bubble += (p/2 - 1) * max(0, t+b-3*w) / 2 / p
		default:
			if st != slow {
				bubble += t / float64(par.VirtualStages)
			}
		}
	}
	return float64(passes(par, slow.Work))*slow.Time.MbSec + bubble + tail.Time.TlSec, bubble, slow, tail
}

// PipelineStep is PipelineEstimate's StepSeconds alone (search ranks
// layouts by it).
func PipelineStep(plan *core.Plan, stages []*StageTime) float64 {
	step, _, _, _ := pipelineStep(plan.Parallel.Norm(), stages)
	return step
}

// pipelineEstimate is the plan's estimate over all stages: the critical
// path (the slowest stage's micro-batches, the fill and drain, the longest
// tail), MFU and HFU over the FLOPs of all stages.
func PipelineEstimate(plan *core.Plan, stages []*StageTime) replay.TimeEstimate {
	par := plan.Parallel.Norm()
	step, bubble, slow, tail := pipelineStep(par, stages)
	if slow == nil {
		return replay.TimeEstimate{}
	}
	m := float64(passes(par, slow.Work))
	te := replay.TimeEstimate{StepSeconds: step}
	for _, s := range slow.Time.PerMB {
		te.Breakdown = append(te.Breakdown, replay.TimeShare{Name: s.Name, Seconds: m * s.Seconds})
	}
	te.Breakdown = append(te.Breakdown, replay.TimeShare{Name: "bubble", Seconds: bubble})
	te.Breakdown = append(te.Breakdown, tail.Time.Tail...)
	te.Modules = stageModules(slow, tail, bubble)
	w := *slow.Work
	w.M = passes(par, slow.Work)
	w.Flops, w.HwFlops = 0, 0
	for _, st := range stages {
		w.Flops += st.Work.Flops
		w.HwFlops += st.Work.HwFlops
	}
	w.Utilisation(plan, &te, par.PP)
	te.Notes = append(te.Notes, fmt.Sprintf("pipeline: %d stages, %d micro-batches, %s schedule; bubble %.1f%% of the step",
		par.PP, slow.Work.M, par.Schedule, 100*bubble/step))
	return te
}

// pipelineTime composes the step of a pipelined plan from its stages'
// reports and times. Every stage report gets the pipeline's step time, with its own
// idle time as "bubble"; top (the report shown for the plan) gets the
// critical path (pipelineEstimate).
func PipelineTime(plan *core.Plan, top *replay.Report, ranks []*replay.Report, stages []*StageTime) {
	for _, st := range stages {
		if st == nil {
			return // a stage without a time model (its notes say why)
		}
	}
	te := PipelineEstimate(plan, stages)
	if te.StepSeconds <= 0 {
		return
	}
	step := te.StepSeconds
	par := plan.Parallel.Norm()
	for i, r := range ranks {
		st := stages[i]
		w := *st.Work
		w.M = passes(par, st.Work)
		busy := float64(w.M)*st.Time.MbSec + st.Time.TlSec
		rt := replay.TimeEstimate{StepSeconds: step, Notes: r.Time.Notes}
		for _, s := range st.Time.PerMB {
			rt.Breakdown = append(rt.Breakdown, replay.TimeShare{Name: s.Name, Seconds: float64(w.M) * s.Seconds})
		}
		rt.Breakdown = append(rt.Breakdown, replay.TimeShare{Name: "bubble", Seconds: step - busy})
		rt.Breakdown = append(rt.Breakdown, st.Time.Tail...)
		rt.Modules = stageModules(st, st, step-busy)
		w.Utilisation(plan, &rt, 1)
		rt.Notes = append(rt.Notes, fmt.Sprintf("stage %d busy %.3g s of the %.3g s step", i, busy, step))
		r.Time = rt
	}
	top.Time = te
}

// stageModules is r.modules of a pipeline: the modules of stage st's
// micro-batches (summarise's rows), its exposed communication, the bubble, and the tail of
// stage tail.
func stageModules(st, tail *StageTime, bubble float64) []replay.ModuleTime {
	if !st.ops {
		return nil // the search's estimate: no ops to show
	}
	rows := slices.Clone(st.modules) // each report appends its own terms
	rows = appendTerm(rows, "bubble", bubble)
	for _, s := range tail.Time.Tail {
		rows = appendTerm(rows, s.Name, s.Seconds)
	}
	return rows
}
