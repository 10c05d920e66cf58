package search

import (
	"fmt"
	"sync"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
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
// the last, are alike). The memory bound reads saved and params only
// (and the profile's memory figures, newProfileIn's); the step time
// reads stages, which fill sums, from the priced profile, for the
// layouts that pass the bound.
type stageShape struct {
	pp, v  int64
	saved  []int64 // activations each model chunk holds for backward, in chunk order (without a pipeline: the model's)
	kindOf []int   // stage s's distinct stage
	// chunks: each distinct stage's chunks, for a split of repeated
	// blocks; else params: each distinct stage's parameters.
	chunks [][]chunkKey
	params []paramAgg
	stages []unitSums // the distinct stages' units; nil until fill
	// compute is each distinct stage's compute, its stages' ct, which
	// stepBound reads; nil until fillCompute (or fill).
	compute []timing.ComputeTime
	once    sync.Once // fillShared's
}

// shape is the memory-bound part of the units of the layouts of par's
// pipeline split (its pp, virtual stages and split of the blocks).
func (pr *profile) shape(par core.Parallelism) (*stageShape, error) {
	return pr.shapeIn(par, nil)
}

// shapeIn is shape, its split of the blocks and distinct stages taken
// from splits (shared with the other shapes of the run; nil: its own).
func (pr *profile) shapeIn(par core.Parallelism, splits *splitTable) (*stageShape, error) {
	par = par.Norm()
	sh := &stageShape{pp: par.PP, v: par.VirtualStages}
	if pr.parts&partsFor(par) == 0 {
		return nil, fmt.Errorf("internal error: a profile without the units of %v", par)
	}
	if par.PP <= 1 { // the model, its rest and n blocks (fill sums its units, base.add(block, n))
		sh.params = []paramAgg{pr.base.params.add(pr.block.params, pr.n)}
		sh.saved, sh.kindOf = []int64{pr.base.saved + pr.n*pr.block.saved}, []int{0}
		return sh, nil
	}
	if pr.mixed {
		return pr.lowerChunks(par, sh)
	}
	split := splits.of(par, pr.n)
	if split.err != nil {
		return nil, split.err
	}
	last := par.PP*par.VirtualStages - 1
	sh.saved = make([]int64, len(split.layers))
	for g, blocks := range split.layers {
		sh.saved[g] = pr.chunkSaved(int64(g), last, blocks)
	}
	sh.kindOf, sh.chunks = split.kindOf, split.chunks // read-only, shared (splitTable)
	return sh, nil
}

// fill sums the units of sh's distinct stages, once; the step time of
// sh's layouts reads them.
func (sh *stageShape) fill(pr *profile) { sh.fillIn(pr, &stageRoom{}) }

// fillShared is fill, once, for layouts of sh timed on any goroutine,
// summing in a room of rooms.
func (sh *stageShape) fillShared(pr *profile, rooms *sync.Pool) {
	sh.once.Do(func() {
		room := rooms.Get().(*stageRoom)
		sh.fillIn(pr, room)
		rooms.Put(room)
	})
}

// fillCompute sets sh.compute: each distinct stage's compute as fill
// sums it (the same operations on the same figures, so the same bits:
// TestStageUnitsEqualChainedSums), without the stages' other figures
// and lists.
func (sh *stageShape) fillCompute(pr *profile) {
	if sh.compute != nil {
		return
	}
	switch {
	case sh.stages != nil: // summed already (lowerChunks, fill)
		sh.compute = make([]timing.ComputeTime, len(sh.stages))
		for k := range sh.stages {
			sh.compute[k] = sh.stages[k].ct
		}
	case sh.pp <= 1: // base.add(block, n), as fill sums it
		sh.compute = []timing.ComputeTime{pr.base.addFigures(pr.block, float64(pr.n)).ct}
	default: // stageUnits' figures
		sh.compute = make([]timing.ComputeTime, len(sh.chunks))
		for k, cks := range sh.chunks {
			var ct timing.ComputeTime
			for _, ck := range cks {
				c := &pr.chunks[ck.kind]
				ct = ct.Plus(c.base.addFigures(c.block, float64(ck.blocks)).ct, 1)
			}
			sh.compute[k] = ct
		}
	}
}

// fillIn is fill, summing in room, which pr's shapes share on one
// goroutine.
func (sh *stageShape) fillIn(pr *profile, room *stageRoom) {
	defer sh.fillCompute(pr)
	if sh.stages != nil {
		return
	}
	if sh.pp <= 1 {
		u := pr.base.add(pr.block, float64(pr.n))
		u.params = sh.params[0]
		sh.stages = []unitSums{u}
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
		u = u.addScalars(c.base.addFigures(c.block, b), 1)
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
		prog, err := lowerWith(pr.plan, pr.plan.Model, par, &core.StageSpec{Stage: s, Inflight: 1, Chunks: []int64{int64(g)}, Split: split}, core.ProgramSize{}, nil)
		if err != nil {
			return nil, err
		}
		chunks[g] = unitOf(prog, pr.plan, nil)
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
	// Offloaded activations leave the GPU once the forward is done with
	// them (core.Offload): the bound counts none held.
	heldOnGPU := int64(1)
	if p.Offload != nil && p.Offload.Activations != "" {
		heldOnGPU = 0
	}
	if par.PP <= 1 {
		fe.minStates = minStates(p, mode, sh.params[0]) + nonTorch
		fe.minDevice = fe.minStates + heldOnGPU*sh.saved[0]
		return fe
	}
	m := p.MicroBatches()
	var room [8]int64 // a split's distinct stages (a few), kept off the heap at every layout's bound
	statesOf := room[:]
	if n := max(len(sh.chunks), len(sh.params)); n > len(room) {
		statesOf = make([]int64, n)
	}
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
		held := heldOnGPU * heldFor(sh.saved, par.PP, par.VirtualStages, s, core.Inflight(par, s, m))
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
