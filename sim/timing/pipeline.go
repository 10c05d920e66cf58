package timing

import (
	"fmt"
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
}

// stageMicroBatch lowers one micro-batch through each of the stage's model
// chunks (the stage program itself holds the micro-batches in flight at
// the memory peak, which is not the unit of time).
func stageMicroBatch(p *core.Plan) (*core.Program, error) {
	st := p.PipeStage
	par := p.Parallel.Norm()
	chunks := make([]int64, par.VirtualStages)
	for c := range chunks {
		chunks[c] = int64(c)*par.PP + st.Stage
	}
	q := *p
	q.PipeStage = &core.StageSpec{Stage: st.Stage, Inflight: int64(len(chunks)), Chunks: chunks, Split: st.Split}
	return q.LowerProgram()
}

// stageTransfers counts the activations stage s receives and sends per
// micro-batch (one per model chunk, except into the first chunk and out
// of the last).
func StageTransfers(par core.Parallelism, s int64) (recv, send int64) {
	last := par.PP*par.VirtualStages - 1
	for c := int64(0); c < par.VirtualStages; c++ {
		g := c*par.PP + s
		if g > 0 {
			recv++
		}
		if g < last {
			send++
		}
	}
	return recv, send
}

// pipelineStep composes the step from the stages' times (the formula
// above): the step, the bubble, the slowest stage and the stage with the
// longest tail. slow is nil when stages is empty.
func pipelineStep(v int64, stages []*StageTime) (step, bubble float64, slow, tail *StageTime) {
	var sum float64
	for _, st := range stages {
		sum += st.Time.MbSec
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
	bubble = (sum - slow.Time.MbSec) / float64(v)
	return float64(slow.Work.M)*slow.Time.MbSec + bubble + tail.Time.TlSec, bubble, slow, tail
}

// pipelineEstimate is the plan's estimate over all stages: the critical
// path (the slowest stage's micro-batches, the fill and drain, the longest
// tail), MFU and HFU over the FLOPs of all stages.
func PipelineEstimate(plan *core.Plan, stages []*StageTime) replay.TimeEstimate {
	par := plan.Parallel.Norm()
	step, bubble, slow, tail := pipelineStep(par.VirtualStages, stages)
	if slow == nil {
		return replay.TimeEstimate{}
	}
	m := float64(slow.Work.M)
	te := replay.TimeEstimate{StepSeconds: step}
	for _, s := range slow.Time.PerMB {
		te.Breakdown = append(te.Breakdown, replay.TimeShare{Name: s.Name, Seconds: m * s.Seconds})
	}
	te.Breakdown = append(te.Breakdown, replay.TimeShare{Name: "bubble", Seconds: bubble})
	te.Breakdown = append(te.Breakdown, tail.Time.Tail...)
	te.Modules = stageModules(slow, tail, m, bubble)
	w := *slow.Work
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
	for i, r := range ranks {
		st := stages[i]
		busy := float64(st.Work.M)*st.Time.MbSec + st.Time.TlSec
		rt := replay.TimeEstimate{StepSeconds: step, Notes: r.Time.Notes}
		for _, s := range st.Time.PerMB {
			rt.Breakdown = append(rt.Breakdown, replay.TimeShare{Name: s.Name, Seconds: float64(st.Work.M) * s.Seconds})
		}
		rt.Breakdown = append(rt.Breakdown, replay.TimeShare{Name: "bubble", Seconds: step - busy})
		rt.Breakdown = append(rt.Breakdown, st.Time.Tail...)
		rt.Modules = stageModules(st, st, float64(st.Work.M), step-busy)
		st.Work.Utilisation(plan, &rt, 1)
		rt.Notes = append(rt.Notes, fmt.Sprintf("stage %d busy %.3g s of the %.3g s step", i, busy, step))
		r.Time = rt
	}
	top.Time = te
}

// stageModules is r.modules of a pipeline: the modules of stage st's m
// micro-batches, its exposed communication, the bubble, and the tail of
// stage tail.
func stageModules(st, tail *StageTime, m, bubble float64) []replay.ModuleTime {
	rows := moduleRows(st.Work, gpuTime{PerMB: st.Time.PerMB, Tail: nil}, m)
	rows = appendTerm(rows, "bubble", bubble)
	for _, s := range tail.Time.Tail {
		rows = appendTerm(rows, s.Name, s.Seconds)
	}
	return rows
}
