package search

import (
	"fmt"
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
// the last, are alike). The memory bound reads saved and params only;
// the step time reads stages, which fill sums for the layouts that pass
// the bound.
type stageShape struct {
	pp, v  int64
	saved  []int64 // activations each model chunk holds for backward, in chunk order (without a pipeline: the model's)
	kindOf []int   // stage s's distinct stage
	// chunks: each distinct stage's chunks, for a split of repeated
	// blocks; else params: each distinct stage's parameters.
	chunks [][]chunkKey
	params []paramAgg
	stages []unitSums // the distinct stages' units; nil until fill
}

// shape is the memory-bound part of the units of the layouts of par's
// pipeline split (its pp, virtual stages and split of the blocks).
func (pr *profile) shape(par core.Parallelism) (*stageShape, error) {
	par = par.Norm()
	sh := &stageShape{pp: par.PP, v: par.VirtualStages}
	if pr.parts&partsFor(par) == 0 {
		return nil, fmt.Errorf("internal error: a profile without the units of %v", par)
	}
	if par.PP <= 1 {
		u := pr.base.add(pr.block, float64(pr.n))
		u.params = pr.base.params.add(pr.block.params, pr.n)
		sh.stages, sh.params, sh.saved, sh.kindOf = []unitSums{u}, []paramAgg{u.params}, []int64{u.saved}, []int{0}
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
	var key []byte
	for s := int64(0); s < par.PP; s++ {
		key = strconv.AppendBool(key[:0], s == 0)
		key = strconv.AppendBool(key, s == par.PP-1)
		for c := int64(0); c < par.VirtualStages; c++ {
			key = strconv.AppendInt(append(key, ','), layers[c*par.PP+s], 10)
		}
		k, ok := seen[string(key)]
		if !ok {
			cks := make([]chunkKey, par.VirtualStages)
			for c := range cks {
				g := int64(c)*par.PP + s
				cks[c] = chunkKey{chunkKind(g, last), layers[g]}
			}
			k = len(sh.chunks)
			seen[string(key)] = k
			sh.chunks = append(sh.chunks, cks)
		}
		sh.kindOf = append(sh.kindOf, k)
	}
	return sh, nil
}

// fill sums the units of sh's distinct stages, once; the step time of
// sh's layouts reads them.
func (sh *stageShape) fill(pr *profile) { sh.fillIn(pr, &stageRoom{}) }

// fillIn is fill, summing in room, which pr's shapes share on one
// goroutine.
func (sh *stageShape) fillIn(pr *profile, room *stageRoom) {
	if sh.stages != nil {
		return
	}
	sh.stages = make([]unitSums, len(sh.chunks))
	for k, cks := range sh.chunks {
		sh.stages[k] = pr.stageUnits(cks, room)
	}
}

// stageRoom is where stageUnits sums a profile's stages: the lists it
// reuses, and the profile's collectives numbered (commIndex), so that a
// stage adds each chunk's in one pass instead of looking each up in the
// sums so far (a stage of the interleaved schedule sums dozens of chunks).
// A room belongs to one goroutine.
type stageRoom struct {
	of                     *profile
	sums                   []timing.CommSum // the profile's distinct collectives, N unset; nil: some list holds two alike (mergeComm then)
	ids                    [3]struct{ base, block []int }
	chunk                  []float64 // by collective: a chunk's count; inChunk says which are set
	stage                  []float64 // by collective: the stage's count so far; inStage says which are set
	inChunk, inStage       []bool
	chunkOrder, stageOrder []int            // the collectives as a chunk's and the stage's list meet them
	comm                   []timing.CommSum // mergeComm's room: a stage's collectives
	list                   []timing.CommSum // mergeComm's room: a chunk's collectives
	parms                  paramAgg         // a stage's parameters being summed
}

// commKey is what mergeComm tells collectives apart by.
type commKey struct {
	kind, group string
	bytes       int64
	backward    bool
	hide        float64
}

// commIndex numbers pr's chunks' collectives (once per profile).
func (r *stageRoom) commIndex(pr *profile) {
	if r.of == pr {
		return
	}
	*r = stageRoom{of: pr, chunkOrder: r.chunkOrder[:0], stageOrder: r.stageOrder[:0], comm: r.comm[:0], list: r.list[:0], parms: r.parms[:0]}
	index := map[commKey]int{}
	number := func(list []timing.CommSum) ([]int, bool) {
		ids := make([]int, len(list))
		seen := map[int]bool{}
		for i, c := range list {
			k := commKey{c.Kind, c.Group, c.Bytes, c.Backward, c.Hide}
			id, ok := index[k]
			if !ok {
				id = len(r.sums)
				index[k] = id
				c.N = 0
				r.sums = append(r.sums, c)
			}
			if seen[id] || c.Hide != c.Hide { // two alike, or a NaN mergeComm never matches
				return nil, false
			}
			seen[id] = true
			ids[i] = id
		}
		return ids, true
	}
	for kind := range pr.chunks {
		c := &pr.chunks[kind]
		var ok1, ok2 bool
		r.ids[kind].base, ok1 = number(c.base.comm)
		r.ids[kind].block, ok2 = number(c.block.comm)
		if !ok1 || !ok2 {
			r.sums = nil
			return
		}
	}
	n := len(r.sums)
	r.chunk, r.stage = make([]float64, n), make([]float64, n)
	r.inChunk, r.inStage = make([]bool, n), make([]bool, n)
}

// stageUnits is the units of a stage running the chunks cks: the sum of
// pr.chunk(ck) over cks as unitSums.add makes it (the same figures, the
// same lists), each list summed once in room rather than copied at every
// add, and kept in a list of its own length.
func (pr *profile) stageUnits(cks []chunkKey, room *stageRoom) unitSums {
	room.commIndex(pr)
	var u unitSums
	params := room.parms[:0]
	comm := room.comm[:0]
	stageOrder := room.stageOrder[:0]
	for _, ck := range cks {
		c := &pr.chunks[ck.kind]
		b := float64(ck.blocks)
		// The chunk, c.base.add(c.block, b): its figures, then its
		// collectives with no zero count.
		cu := c.base.addScalars(c.block, b)
		if b == 1 && c.base.zero() {
			cu = c.block
		}
		u = u.addScalars(cu, 1)
		if room.sums == nil {
			chunk := append(room.list[:0], c.base.comm...)
			if b != 0 {
				chunk = mergeComm(chunk, c.block.comm, b)
			}
			comm = mergeComm(comm, chunk, 1)
			room.list = chunk
		} else {
			// mergeComm's sums, the same operations in the same order,
			// each collective found by its number.
			ids := &room.ids[ck.kind]
			order := room.chunkOrder[:0]
			for i, id := range ids.base {
				room.chunk[id], room.inChunk[id] = c.base.comm[i].N, true
				order = append(order, id)
			}
			if b != 0 {
				for i, id := range ids.block {
					n := c.block.comm[i].N
					if room.inChunk[id] {
						room.chunk[id] += b * n
						continue
					}
					room.chunk[id], room.inChunk[id] = n*b, true
					order = append(order, id)
				}
			}
			for _, id := range order {
				room.inChunk[id] = false
				if room.inStage[id] {
					room.stage[id] += 1 * room.chunk[id]
					continue
				}
				room.stage[id], room.inStage[id] = room.chunk[id]*1, true
				stageOrder = append(stageOrder, id)
			}
			room.chunkOrder = order
		}
		params = params.merge(c.base.params, 1)
		if ck.blocks > 0 {
			params = params.merge(c.block.params, ck.blocks)
		}
	}
	if room.sums != nil {
		for _, id := range stageOrder {
			room.inStage[id] = false
			c := room.sums[id]
			c.N = room.stage[id]
			comm = append(comm, c)
		}
		room.stageOrder = stageOrder
	}
	room.comm, room.parms = comm, params
	n := 0
	for _, c := range comm {
		if c.N != 0 {
			n++
		}
	}
	if n > 0 {
		u.comm = make([]timing.CommSum, 0, n)
		for _, c := range comm {
			if c.N != 0 {
				u.comm = append(u.comm, c)
			}
		}
		timing.SortComm(u.comm)
	}
	if len(params) > 0 {
		u.params = append(paramAgg(nil), params...)
	}
	return u
}

// mergeComm adds k times each of v to sums, in place (as unitSums.add
// does, before it drops the zero counts).
func mergeComm(sums, v []timing.CommSum, k float64) []timing.CommSum {
	for _, c := range v {
		found := false
		for i := range sums {
			s := &sums[i]
			if s.Kind == c.Kind && s.Group == c.Group && s.Bytes == c.Bytes && s.Backward == c.Backward && s.Hide == c.Hide {
				s.N += k * c.N
				found = true
				break
			}
		}
		if !found {
			c.N *= k
			sums = append(sums, c)
		}
	}
	return sums
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
		sh.stages, sh.params = append(sh.stages, u), append(sh.params, u.params)
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

// chunk is the units of a model chunk of kind and blocks ck, parameters
// included.
func (pr *profile) chunk(ck chunkKey) unitSums {
	c := &pr.chunks[ck.kind]
	return c.base.add(c.block, float64(ck.blocks))
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
// configuration with sh's pipeline; nonTorch is nonTorchBytes(p). It
// fills sh (not safe while another goroutine reads sh).
func (pr *profile) estimate(p *core.Plan, sh *stageShape, nonTorch int64) fastEstimate {
	fe := pr.bound(p, sh, nonTorch)
	sh.fill(pr)
	fe.time = pr.stepTime(p, sh)
	return fe
}

// bound is the memory bound of plan p (its fastEstimate less the time),
// from sh's activations and parameters alone.
func (pr *profile) bound(p *core.Plan, sh *stageShape, nonTorch int64) fastEstimate {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	par := p.Parallel.Norm()
	mode := distMode(p)
	var fe fastEstimate
	if par.PP <= 1 {
		fe.minStates = minStates(p, mode, sh.params[0]) + nonTorch
		fe.minDevice = fe.minStates + sh.saved[0]
		return fe
	}
	m := p.MicroBatches()
	statesOf := make([]int64, max(len(sh.chunks), len(sh.params)))
	if sh.chunks == nil {
		for k := range sh.params {
			statesOf[k] = minStates(p, mode, sh.params[k]) + nonTorch
		}
	} else {
		// minStates is a sum over parameters: a stage's is the sum of its
		// chunks', and a chunk's its base's and blocks times its block's.
		var base, block [len(pr.chunks)]int64
		for c := range pr.chunks {
			base[c] = minStates(p, mode, pr.chunks[c].base.params)
			block[c] = minStates(p, mode, pr.chunks[c].block.params)
		}
		for k, cks := range sh.chunks {
			statesOf[k] = nonTorch
			for _, ck := range cks {
				statesOf[k] += base[ck.kind] + ck.blocks*block[ck.kind]
			}
		}
	}
	for s := int64(0); s < par.PP; s++ {
		k := sh.kindOf[s]
		held := heldFor(sh.saved, par.PP, par.VirtualStages, s, core.Inflight(par, s, m))
		fe.minStates = max(fe.minStates, statesOf[k])
		if statesOf[k]+held > fe.minDevice {
			fe.minDevice, fe.fullest = statesOf[k]+held, s
		}
	}
	return fe
}

// heldFor is the activations stage s of pp (v chunks a stage, saved
// each chunk's) holds for backward with n forwards in flight at its
// peak. Forward j runs the stage's chunk (j mod pp*v) div pp
// (stageChunks), so of n = q*pp*v + r forwards its chunk c runs q*pp and
// those of the last r that fall in c's pp.
func heldFor(saved []int64, pp, v, s, n int64) int64 {
	q, r := n/(pp*v), n%(pp*v)
	var held int64
	for c := range v {
		held += (q*pp + min(max(r-c*pp, 0), pp)) * saved[c*pp+s]
	}
	return held
}

// distMode is the sharding mode a replay of p runs (replay.NewDist's,
// DistReplicated on one GPU), which the bound's model states follow.
func distMode(p *core.Plan) replay.DistMode {
	if !p.Parallel.Active() {
		return replay.DistReplicated
	}
	return replay.ModeOf(p)
}

// stepTime is the step time of plan p from sh's filled stages.
func (pr *profile) stepTime(p *core.Plan, sh *stageShape) replay.TimeEstimate {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	if p.Parallel.Norm().PP > 1 {
		return timing.PipelineEstimate(p, pr.stageTimes(p, sh))
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
	if p.Parallel.Norm().PP > 1 {
		return timing.PipelineStep(p, pr.stageTimes(p, sh))
	}
	w := pr.work(p, &sh.stages[0])
	g := w.Times(p)
	return float64(w.M)*g.MbSec + g.TlSec
}

// stepBound is a lower bound of stepSeconds: the micro-batches times the
// compute of the slowest stage's micro-batch (forward, backward and
// recompute). The step adds to that product only terms that are never
// negative (kernel launches, exposed communication, the bubble, the
// optimizer and the step's tail: timing.GpuWork.Times, PipelineEstimate),
// and float sums and products of non-negative terms are monotone, so the
// bound never exceeds the time (TestSearchFastPathEqualsReplay).
func (pr *profile) stepBound(p *core.Plan, sh *stageShape) float64 {
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	if p.Parallel.Schedule == "dualpipe" { // a stage runs half the micro-batches (timing.passes)
		return 0
	}
	m := int64(max(p.GradAccum, 1))
	if p.Parallel.Norm().PP > 1 {
		m = p.MicroBatches()
	}
	var slow float64
	for k := range sh.stages {
		c := &sh.stages[k].ct
		slow = max(slow, c.Forward+c.Backward+c.Recompute)
	}
	return float64(m) * slow
}

// stageTimes is the time model of each pipeline stage of plan p (after
// its DeepSpeed rewrite) from sh's filled stages.
func (pr *profile) stageTimes(p *core.Plan, sh *stageShape) []*timing.StageTime {
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
			byKind[k] = &timing.StageTime{Work: w, Time: w.Times(&q)}
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
	if zeroOffload(p, w.Mode) {
		// The optimizer steps on the host: no GPU step (timing's
		// OptimizerWorkOf), the partition's copies over PCIe instead.
		pcie, part := offloadSeconds(p, par, u.params)
		w.SetHost(pcie)
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
	return w
}

// zeroOffload says whether a layout of plan p, replayed in sharding mode
// mode, steps its optimizer on the host: ZeRO-Offload
// (replay's distState.ZeroOffload, the search's only offload).
func zeroOffload(p *core.Plan, mode replay.DistMode) bool {
	return mode == replay.DistZeRO && p.Offload != nil && p.Offload.Optimizer != ""
}

// offloadSeconds is the PCIe time of ZeRO-Offload's step on a rank
// holding params, and the partition's elements the host steps, as the
// replay counts them (replay/shard_offload.go,
// offloadShard; timing's hostSeconds prices the bytes): stages 1-2 copy
// the fp32 gradients of the rank's flat partition of each group (dense,
// expert; zeroPartition pads it) down and the updated 16-bit partition
// up; stage 3's partition (each parameter's ceil(numel/degree)) also
// goes down and up in 16 bits at the first micro-step. Every dtype the
// search's precisions copy has a whole byte size, so the sub-groups' sums
// are the sum over the partition.
func offloadSeconds(p *core.Plan, par core.Parallelism, params paramAgg) (seconds float64, part int64) {
	prec := p.Precision
	if par.Zero == 3 {
		for _, e := range params {
			if e.trainable {
				part += e.n * ceilDiv(e.numel, shardDegree(par, e.expert))
			}
		}
	} else {
		dense, expert := params.numel(true)
		if dense > 0 {
			part += zeroPartition(dense, shardDegree(par, false))
		}
		if expert > 0 {
			part += zeroPartition(expert, shardDegree(par, true))
		}
	}
	if part == 0 {
		return 0, 0
	}
	bytes := units.FP32.Bytes(part) + prec.Params.Bytes(part)
	if par.Zero == 3 {
		bytes += 2 * prec.Grads.Bytes(part)
	}
	return timing.PCIeSeconds(p.Device, bytes), part
}

// zeroPartition is a rank's flat ZeRO-1/2 partition of numel elements
// over n ranks, padded as the replay pads it (replay/sharding.go).
func zeroPartition(numel, n int64) int64 {
	a := 2 * n
	return (numel + a - 1) / a * a / n
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

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
	offloaded := zeroOffload(p, mode)
	var total int64
	var degs [2]int64 // dense, expert: worked out at their first parameter
	for _, e := range params {
		k := 0
		if e.expert {
			k = 1
		}
		if degs[k] == 0 {
			degs[k] = shardDegree(par, e.expert)
		}
		deg := degs[k]
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
		if train && e.trainable && !offloaded { // ZeRO-Offload: master, moments and gradient partition on the host
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
