package search

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// The fast estimate of one layout from its profile: the time model's
// inputs summed over units (search_profile.go) and fed to the same
// functions as the full replay (gpuWork.times, pipelineEstimate), and a
// lower bound of the device memory the replay would report.

// fastEstimate is what Search knows of a layout before replaying it.
type fastEstimate struct {
	time replay.TimeEstimate
	// minDevice is a lower bound of the device memory the replay reports
	// (Report.DeviceUsed) on the fullest GPU: model states allocated at
	// setup and kept, plus the activations held for backward at the end of
	// the forward, plus the memory outside PyTorch's allocator.
	minDevice int64
	// minStates is the model-state part of minDevice (with the memory
	// outside the allocator).
	minStates int64
}

// stageShape is the units of a profile's layouts with pp stages of v
// chunks: the whole model without a pipeline, else the first, a middle
// and the last stage (stages between the first and the last are alike).
type stageShape struct {
	pp, v    int64
	perChunk int64
	slots    bool       // the embedding and the loss count as a block each (account_for_embedding/loss)
	stages   []unitSums // [whole] or [first, middle, last]
}

// blocks is the blocks of chunk g: perChunk, less the embedding's and the
// loss's slots on the first and the last chunk.
func (sh *stageShape) blocks(g int64) int64 {
	n := sh.perChunk
	if sh.slots && (g == 0 || g == sh.pp*sh.v-1) {
		n--
	}
	return n
}

// shape sums the units of a layout with pp stages of v model chunks.
func (pr *profile) shape(pp, v int64, slots bool) *stageShape {
	sh := &stageShape{pp: pp, v: v, slots: slots}
	if pp <= 1 {
		sh.stages = []unitSums{pr.base.add(pr.block, float64(pr.n))}
		sh.stages[0].params = pr.base.params.add(pr.block.params, pr.n)
		return sh
	}
	sh.perChunk = pr.n / (pp * v)
	if slots {
		sh.perChunk = (pr.n + 2) / (pp * v)
	}
	kinds := []int64{0, 1, pp - 1}
	if pp == 2 {
		kinds = []int64{0, 1}
	}
	last := pp*v - 1
	for _, s := range kinds {
		var u unitSums
		for c := int64(0); c < v; c++ {
			u = u.add(pr.chunkUnits(c*pp+s, last, sh.blocks(c*pp+s)), 1)
		}
		sh.stages = append(sh.stages, u)
	}
	return sh
}

// chunkUnits is model chunk g's units (of chunks 0..last), parameters
// included.
func (pr *profile) chunkUnits(g, last, blocks int64) unitSums {
	var u unitSums
	if g == 0 {
		u = u.add(pr.first, 1)
	} else {
		u = u.add(pr.recv, 1)
	}
	u = u.add(pr.block, float64(blocks))
	if g == last {
		u = u.add(pr.last, 1)
	}
	return u
}

// chunkSaved is chunk g's activations held for backward.
func (pr *profile) chunkSaved(g, last, blocks int64) int64 {
	n := blocks * pr.block.saved
	if g == 0 {
		n += pr.first.saved
	} else {
		n += pr.recv.saved
	}
	if g == last {
		n += pr.last.saved
	}
	return n
}

// kind is the index in sh.stages of stage s.
func (sh *stageShape) kind(s int64) int {
	switch {
	case sh.pp <= 1 || s == 0:
		return 0
	case s == sh.pp-1:
		return len(sh.stages) - 1
	}
	return 1
}

// nonTorchBytes is the device memory outside PyTorch's allocator that
// Evaluate counts for plan p: the CUDA context and NCCL's buffers.
func nonTorchBytes(p *core.Plan) int64 {
	n := p.Device.Context
	for _, o := range replay.CommOverheads(p) {
		n += o.Bytes
	}
	return n
}

// estimate is the fast estimate of plan p, a layout of the profile's
// configuration with sh's pipeline; nonTorch is nonTorchBytes(p).
func (pr *profile) estimate(p *core.Plan, sh *stageShape, nonTorch int64) fastEstimate {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	par := p.Parallel.Norm()
	var fe fastEstimate
	if par.PP <= 1 {
		u := &sh.stages[0]
		w, states := pr.work(p, u)
		g := w.Times(p)
		fe.time = replay.TimeEstimate{StepSeconds: float64(w.M)*g.MbSec + g.TlSec}
		for _, s := range g.PerMB {
			fe.time.Breakdown = append(fe.time.Breakdown, replay.TimeShare{Name: s.Name, Seconds: float64(w.M) * s.Seconds})
		}
		fe.time.Breakdown = append(fe.time.Breakdown, g.Tail...)
		w.Utilisation(p, &fe.time, 1)
		fe.minStates = states + nonTorch
		fe.minDevice = fe.minStates + u.saved
		return fe
	}
	m := p.MicroBatches()
	last := par.PP*par.VirtualStages - 1
	byKind := make([]*timing.StageTime, len(sh.stages))
	statesOf := make([]int64, len(sh.stages))
	stages := make([]*timing.StageTime, par.PP)
	for s := int64(0); s < par.PP; s++ {
		k := sh.kind(s)
		if byKind[k] == nil {
			q := *p
			q.GradAccum = 1
			if m*par.VirtualStages > core.Inflight(par, s, m) {
				q.GradAccum = m
			}
			q.PipeStage = &core.StageSpec{Stage: s}
			w, states := pr.work(&q, &sh.stages[k])
			w.M = m
			w.PpRecv, w.PpSend = timing.StageTransfers(par, s)
			byKind[k] = &timing.StageTime{Work: w, Time: w.Times(&q)}
			statesOf[k] = states + nonTorch
		}
		stages[s] = byKind[k]
		// Activations of the forwards in flight at the stage's peak
		// (stageChunks: forward j runs chunk (j mod pp*v) div pp).
		var held int64
		for j := range core.Inflight(par, s, m) {
			g := (j%(par.PP*par.VirtualStages))/par.PP*par.PP + s
			held += pr.chunkSaved(g, last, sh.blocks(g))
		}
		fe.minStates = max(fe.minStates, statesOf[k])
		fe.minDevice = max(fe.minDevice, statesOf[k]+held)
	}
	fe.time = timing.PipelineEstimate(p, stages)
	return fe
}

// work is the time model's input for one GPU doing the units u: the same
// fields workOf reads from a replay. It also returns minStates.
func (pr *profile) work(p *core.Plan, u *unitSums) (*timing.GpuWork, int64) {
	par := p.Parallel.Norm()
	w := &timing.GpuWork{M: max(p.GradAccum, 1), Eval: p.Phase == core.Eval}
	w.Mb = u.ct
	w.Attn = u.attn
	if w.Eval {
		w.Flops, w.HwFlops = u.fwdFlops, u.fwdFlops
	} else {
		w.Flops, w.HwFlops = 3*u.fwdFlops, 3*u.fwdFlops+u.recFlops
	}
	w.MbComm = u.comm
	// A stand-in program holding the dense and expert parameters for
	// replay/comm.go's inventory of data-parallel collectives (it reads only
	// their element counts).
	var ps []core.ParamInfo
	for _, trainable := range []bool{true, false} {
		dense, expert := u.params.numel(trainable)
		if dense > 0 {
			ps = append(ps, core.ParamInfo{Numel: dense, Trainable: trainable, TiedTo: -1})
		}
		if expert > 0 {
			ps = append(ps, core.ParamInfo{Numel: expert, Trainable: trainable, TiedTo: -1, Role: "expert_fast"})
		}
	}
	d, err := replay.NewDist(p, &core.Program{Params: ps, Loss: core.NoValue, Input: core.NoValue})
	if err != nil { // the search's layouts wrap no fsdp_units: unreachable
		d = nil
	}
	w.Mode = replay.DistReplicated
	sharded := false
	if d != nil {
		w.Mode, w.Zero = d.Mode, par.Zero
		sharded = d.Mode == replay.DistZeRO || d.Mode == replay.DistFSDP || (d.Mode == replay.DistMegatron && par.DistributedOptimizer)
		for _, c := range d.CommPerStep() {
			if c.Group == "dp" || c.Group == "edp" || c.Group == "dp_replicate" {
				w.DpComm = append(w.DpComm, c)
			}
		}
	}
	var ow timing.OptimizerWork
	for _, e := range u.params {
		if !e.trainable {
			continue
		}
		t, n := e.traffic, e.numel
		if sharded {
			t /= shardDegree(par, e.expert)
			n /= shardDegree(par, e.expert)
		}
		ow.Traffic += float64(e.n * t)
		ow.Elements += float64(e.n * n)
		ow.Tensors += float64(e.n)
	}
	if !w.Eval {
		w.Optimizer, w.OptimizerCPU = timing.OptimizerTime(p, ow)
	}
	w.StepOverhead = p.Overheads.StepSeconds
	w.Tokens = float64(p.Batch*p.Seq*max(p.Members, 1)) * float64(w.M) * float64(par.DP)
	return w, minStates(p, w.Mode, u.params)
}

// shardDegree is the data-parallel sharding degree of a parameter: dp x cp,
// or dp x cp / ep for experts (distState.Degree).
func shardDegree(par core.Parallelism, expert bool) int64 {
	if expert {
		return par.ExpertShardDegree()
	}
	return par.ShardDegree()
}

// minStates is a lower bound of the model states a GPU holding params
// allocates at setup and keeps through the step: the parameters (sharded
// over data parallelism with ZeRO-3 and FSDP), the master weights and
// optimizer state (sharded with ZeRO, FSDP and the distributed optimizer),
// and the persistent gradient buffers (DDP's buckets and Megatron's
// main-gradient buffer hold every gradient; ZeRO-3 its partition).
// Integer division rounds down where the replay pads up.
func minStates(p *core.Plan, mode replay.DistMode, params paramAgg) int64 {
	par := p.Parallel.Norm()
	prec := p.Precision
	train := p.Phase != core.Eval
	var total int64
	for _, e := range params {
		deg := shardDegree(par, e.expert)
		shardP, shardS := int64(1), int64(1)
		switch mode {
		case replay.DistZeRO:
			shardS = deg
			if par.Zero == 3 {
				shardP = deg
			}
		case replay.DistFSDP:
			shardP, shardS = deg, deg
		case replay.DistMegatron:
			if par.DistributedOptimizer {
				shardS = deg
			}
		}
		b := prec.Params.Bytes(e.numel) / shardP
		if train && e.trainable {
			var st int64
			if prec.Master != units.InvalidDType && prec.Master != prec.Params {
				st += prec.Master.Bytes(e.numel)
			}
			st += p.Optimizer.MinStateBytes(e.numel, prec.States)
			b += st / shardS
			switch {
			case mode == replay.DistDDP || mode == replay.DistMegatron:
				b += prec.Grads.Bytes(e.numel)
			case mode == replay.DistZeRO && par.Zero == 3:
				b += prec.Grads.Bytes(e.numel) / deg
			}
		}
		total += e.n * b
	}
	return total
}
