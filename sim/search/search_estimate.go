package search

import (
	"strconv"

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
	// fullest is the pipeline stage whose bound is minDevice (0 without
	// a pipeline): the one to replay first to show that a layout needs
	// too much memory.
	fullest int64
}

// stageShape is the units of a profile's layouts with one pipeline
// split: the whole model without a pipeline, else each distinct stage
// (stages running chunks of the same block counts, neither the first nor
// the last, are alike).
type stageShape struct {
	pp, v  int64
	saved  []int64    // activations each model chunk holds for backward, in chunk order
	stages []unitSums // the distinct stages
	kindOf []int      // stage s's index in stages
}

// shape sums the units of the layouts of par's pipeline split (its pp,
// virtual stages and split of the blocks).
func (pr *profile) shape(par core.Parallelism) (*stageShape, error) {
	par = par.Norm()
	sh := &stageShape{pp: par.PP, v: par.VirtualStages}
	if par.PP <= 1 {
		sh.stages = []unitSums{pr.base.add(pr.block, float64(pr.n))}
		sh.stages[0].params = pr.base.params.add(pr.block.params, pr.n)
		sh.kindOf = []int{0}
		return sh, nil
	}
	if pr.mixed {
		return pr.lowerChunks(par, sh)
	}
	layers, err := par.ChunkLayers(pr.n, "search")
	if err != nil {
		return nil, err
	}
	last := par.PP*par.VirtualStages - 1
	for g := range layers {
		sh.saved = append(sh.saved, pr.chunkSaved(int64(g), last, layers[g]))
	}
	seen := map[string]int{}
	chunks := map[chunkKey]unitSums{} // chunk sums are pure: each (kind, blocks) summed once
	var key []byte
	for s := int64(0); s < par.PP; s++ {
		key = strconv.AppendBool(key[:0], s == 0)
		key = strconv.AppendBool(key, s == par.PP-1)
		for c := int64(0); c < par.VirtualStages; c++ {
			key = strconv.AppendInt(append(key, ','), layers[c*par.PP+s], 10)
		}
		k, ok := seen[string(key)]
		if !ok {
			var u unitSums
			for c := int64(0); c < par.VirtualStages; c++ {
				g := c*par.PP + s
				ck := chunkKey{chunkKind(g, last), layers[g]}
				cu, ok := chunks[ck]
				if !ok {
					cu = pr.chunk(g, last, layers[g])
					chunks[ck] = cu
				}
				u = u.add(cu, 1)
			}
			k = len(sh.stages)
			seen[string(key)] = k
			sh.stages = append(sh.stages, u)
		}
		sh.kindOf = append(sh.kindOf, k)
	}
	return sh, nil
}

// chunkKey is a model chunk's kind and block count: what its units are
// a function of (profile.chunk).
type chunkKey struct {
	kind   int
	blocks int64
}

// lowerChunks fills sh for a model whose blocks differ (no block unit
// extrapolates): each model chunk of par's split is lowered whole, as the
// replay's stage lowers it, and each stage sums its chunks.
func (pr *profile) lowerChunks(par core.Parallelism, sh *stageShape) (*stageShape, error) {
	split, err := core.SplitStages(pr.plan.Model, par)
	if err != nil {
		return nil, err
	}
	chunks := make([]unitSums, par.PP*par.VirtualStages)
	for g := range chunks {
		s := int64(g) % par.PP
		prog, err := lowerWith(pr.plan, pr.plan.Model, par, &core.StageSpec{Stage: s, Inflight: 1, Chunks: []int64{int64(g)}, Split: split}, core.ProgramSize{})
		if err != nil {
			return nil, err
		}
		chunks[g] = unitOf(prog, pr.plan)
		sh.saved = append(sh.saved, chunks[g].saved)
	}
	for s := int64(0); s < par.PP; s++ {
		var u unitSums
		for c := int64(0); c < par.VirtualStages; c++ {
			u = u.add(chunks[c*par.PP+s], 1)
		}
		sh.kindOf = append(sh.kindOf, len(sh.stages))
		sh.stages = append(sh.stages, u)
	}
	return sh, nil
}

// chunkKind is the kind of model chunk g of chunks 0..last (last > 0).
func chunkKind(g, last int64) int {
	switch g {
	case 0:
		return firstChunk
	case last:
		return lastChunk
	}
	return middleChunk
}

// chunk is model chunk g's units (of chunks 0..last), parameters
// included.
func (pr *profile) chunk(g, last, blocks int64) unitSums {
	c := &pr.chunks[chunkKind(g, last)]
	return c.base.add(c.block, float64(blocks))
}

// chunkSaved is chunk g's activations held for backward.
func (pr *profile) chunkSaved(g, last, blocks int64) int64 {
	c := &pr.chunks[chunkKind(g, last)]
	return c.base.saved + blocks*c.block.saved
}

// nonTorchBytes is the device memory outside PyTorch's allocator that
// Evaluate counts for plan p: the CUDA context and NCCL's buffers.
func nonTorchBytes(p *core.Plan) int64 {
	var n int64
	for _, o := range replay.Overheads(p) {
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
	byKind := make([]*timing.StageTime, len(sh.stages))
	statesOf := make([]int64, len(sh.stages))
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
			w, states := pr.work(&q, &sh.stages[k])
			w.M = m
			w.PpRecv, w.PpSend = timing.StageTransfers(par, s)
			byKind[k] = &timing.StageTime{Work: w, Time: w.Times(&q)}
			statesOf[k] = states + nonTorch
		}
		st := *byKind[k] // a stage of its own: the bubble sums every stage but the slowest one
		stages[s] = &st
		// Activations of the forwards in flight at the stage's peak
		// (stageChunks: forward j runs chunk (j mod pp*v) div pp).
		var held int64
		for j := range core.Inflight(par, s, m) {
			g := (j%(par.PP*par.VirtualStages))/par.PP*par.PP + s
			held += sh.saved[g]
		}
		fe.minStates = max(fe.minStates, statesOf[k])
		if statesOf[k]+held > fe.minDevice {
			fe.minDevice, fe.fullest = statesOf[k]+held, s
		}
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
	d, err := replay.NewDist(p, &core.Program{Params: ps, Loss: core.NoValue, Input: core.NoValue, Labels: core.NoValue})
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
