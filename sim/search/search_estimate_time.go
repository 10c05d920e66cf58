package search

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// stepTime is the step time of plan p from sh's filled stages.
func (pr *profile) stepTime(p *core.Plan, sh *stageShape) replay.TimeEstimate {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	if core.OrOne(p.Parallel.PP) > 1 {
		return timing.PipelineEstimate(p, pr.stageTimes(p, sh, true))
	}
	w := pr.work(p, &sh.stages[0])
	g := w.Times(p)
	t := replay.TimeEstimate{StepSeconds: float64(w.M)*g.MbSec + g.TlSec}
	for _, s := range g.PerMB {
		t.Breakdown = append(t.Breakdown, replay.TimeShare{Name: s.Name, Seconds: float64(w.M) * s.Seconds})
	}
	t.Breakdown = append(t.Breakdown, g.Tail...)
	w.Utilisation(p, &t, 1)
	return t
}

// stepSeconds is stepTime's StepSeconds alone: what the search ranks by.
func (pr *profile) stepSeconds(p *core.Plan, sh *stageShape) float64 {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	if core.OrOne(p.Parallel.PP) > 1 {
		return timing.PipelineStep(p, pr.stageTimes(p, sh, false))
	}
	w := pr.work(p, &sh.stages[0])
	g := w.Sums(p) // Times' sums without its rows
	return float64(w.M)*g.MbSec + g.TlSec
}

// stepBound is a lower bound of stepSeconds: the micro-batches times the
// slowest stage's micro-batch, of which it counts the compute (forward,
// backward and recompute) and, with tp, what the stage's
// tensor-parallel collectives leave exposed (stageTP, the time model's
// tp_comm row). The step adds to that product only terms that are never
// negative (kernel launches, the other exposed communication, the
// bubble, the optimizer and the step's tail: timing.GpuWork.Times,
// PipelineEstimate), so in exact arithmetic the bound never exceeds the
// time. In floats the compute is summed as the time model sums it, and
// float sums and products of non-negative terms are monotone; the tp
// row is summed in another order (by unit, not by collective), which
// moves it by at most n rounding errors of 2^-53 each over n terms (a
// few hundred), so the bound is taken boundSlack below that
// (TestSearchFastPathEqualsReplay, TestSearchBruteForce).
//
// A layout timed by its replay (timedByItsReplay) is bounded by its
// compute alone (tp false).
func (pr *profile) stepBound(p *core.Plan, sh *stageShape, tp bool) float64 {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	if p.Parallel.Schedule == "dualpipe" { // a stage runs half the micro-batches (timing.passes)
		return 0
	}
	m := int64(max(p.GradAccum, 1))
	if core.OrOne(p.Parallel.PP) > 1 {
		m = p.MicroBatches()
	}
	var slow float64
	var withTP bool
	for k := range sh.compute {
		c := &sh.compute[k]
		mb := c.Forward + c.Backward + c.Recompute
		if tp {
			if x := pr.stageTP(p, sh, k, c); x > 0 {
				mb, withTP = mb+x, true
			}
		}
		slow = max(slow, mb)
	}
	if withTP {
		return float64(m) * slow * boundSlack
	}
	return float64(m) * slow
}

// boundSlack takes stepBound below the rounding of its tensor-parallel
// sums: 1e-9, where n terms of a few hundred move a sum by at most
// n * 2^-53 (below 1e-13).
const boundSlack = 1 - 1e-9

// stageTimes is the time model of each pipeline stage of plan p (after
// its DeepSpeed rewrite) from sh's filled stages, with the rows of each
// stage's time (timing.GpuWork.Times) or their sums alone (Sums: what
// PipelineStep reads).
func (pr *profile) stageTimes(p *core.Plan, sh *stageShape, rows bool) []*timing.StageTime {
	par := p.Parallel.Norm()
	m := p.MicroBatches()
	byKind := make([]*timing.StageTime, len(sh.stages))
	all := make([]timing.StageTime, par.PP)
	stages := make([]*timing.StageTime, par.PP)
	q := *p // each stage kind's plan in turn (the time model keeps none of them)
	for s := int64(0); s < par.PP; s++ {
		k := sh.kindOf[s]
		if byKind[k] == nil {
			q.GradAccum = 1
			if m*par.VirtualStages > core.Inflight(par, s, m) {
				q.GradAccum = m
			}
			q.PipeStage = &core.StageSpec{Stage: s}
			w := pr.work(&q, &sh.stages[k])
			w.M = m
			w.PpRecv, w.PpSend = timing.StageTransfers(par, s)
			st := &timing.StageTime{Work: w}
			if rows {
				st.Time = w.Times(&q)
			} else {
				st.Time = w.Sums(&q)
			}
			byKind[k] = st
		}
		all[s] = *byKind[k] // a stage of its own: the bubble sums every stage but the slowest one
		stages[s] = &all[s]
	}
	return stages
}

// work is the time model's input for one GPU doing the units u: the same
// fields workOf reads from a replay.
func (pr *profile) work(p *core.Plan, u *unitSums) *timing.GpuWork {
	par := p.Parallel.Norm()
	w := &timing.GpuWork{M: max(p.GradAccum, 1), Eval: p.Phase == core.Eval}
	w.Mb = u.ct
	w.Attn = u.attn
	if w.Eval {
		w.Flops, w.HwFlops = u.fwdFlops, u.fwdFlops
	} else {
		w.Flops, w.HwFlops = u.mdlFlops, u.mdlFlops+u.recFlops
	}
	w.MbComm = u.comm
	ps := standInParams(p, u.params)
	stand := &core.Program{Params: ps, Loss: core.NoValue, Input: core.NoValue, Labels: core.NoValue}
	d, err := replay.NewStandInDist(p, stand, par.PP > 1)
	if err != nil { // the search's layouts wrap no fsdp_units: unreachable
		d = nil
	}
	w.Mode = replay.DistReplicated
	sharded := false
	if d != nil {
		w.Mode, w.Zero = d.Mode, par.Zero
		w.ShardEdges = d.ShardEdges()
		sharded = d.Mode == replay.DistZeRO || d.Mode == replay.DistFSDP || (d.Mode == replay.DistMegatron && par.DistributedOptimizer)
		for c := range d.CommPerStep() {
			if timing.DataParallelGroup(c.Group) {
				w.DpComm = append(w.DpComm, c)
			}
		}
		w.DpComm = append(w.DpComm, quantGathers(d, p, u.params)...) // last, as stepComm lists them
	}
	var ow timing.OptimizerWork
	if zeroOffload(p, w.Mode) {
		// The optimizer steps on the host: no GPU step (timing's
		// OptimizerWorkOf), the partition's copies over PCIe instead.
		pcie, part := offloadSeconds(p, &par, u.params)
		w.SetHost(pcie)
		// With overlap_comm, on the reduction stream (as workOf).
		w.SetZeROOffloadCopies(p, part)
		if !w.Eval { // DeepSpeedCPUAdam's step over the partition (timing/cpu_optimizer.go)
			w.CPUOptimizer = timing.CPUOptimizerSeconds(p, float64(part), timing.RanksPerHost(p))
		}
		u = &unitSums{} // no parameter for the GPU's step
	}
	for _, e := range u.params {
		if !e.trainable {
			continue
		}
		t, n := e.traffic, e.numel
		if sharded {
			t /= shardDegree(&par, e.expert)
			n /= shardDegree(&par, e.expert)
		}
		ow.Traffic += float64(e.n * t)
		ow.Elements += float64(e.n * n)
		ow.Tensors += float64(e.n)
		if w.Mode == replay.DistZeRO && !p.ZeroBF16Optimizer() { // DeepSpeed's copies before the step (timing/zero_step.go)
			k := 0
			if e.expert {
				k = 1
			}
			ow.Zero[k].Add(e.numel, e.n, shardDegree(&par, e.expert))
		}
	}
	if !w.Eval {
		w.Optimizer, w.OptimizerCPU = timing.OptimizerTime(p, ow)
	}
	w.StepOverhead = p.Overheads.StepSeconds
	w.Tokens = timing.StepTokens(p, w.M, par.DP)
	return w
}
