package search

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// A profile is made in two steps: newProfileIn lowers its programs and
// sums what the memory bound reads (each unit's parameters and the
// activations it holds for backward), and price sums what the step time
// reads (the ops' times, FLOPs and collectives) from the same programs.
// Run prices a profile only when the bound keeps one of its layouts
// (search.go): in the 70B search of BenchmarkSearchLlama70B1024 the
// bound prunes every layout of 1,333 of the 2,608 profiles.

// Program slots: the programs a profile lowers, each in lists of its own
// (lowering.bufs), held until the profile is priced or dropped.
const (
	oneBlockSlot    = 0 // the one-block model, without a pipeline
	twoBlockSlot    = 1 // the two-block model
	stageSlot       = 2 // + 3*(b-1) + s: stage s of three of b blocks each (b = 1, 2)
	profilePrograms = stageSlot + 6
)

// lowering is one goroutine's lists for the profiles it lowers: each
// program slot's (core.ProgramBuffers), the programs of the profile
// lowered last until release, and their prices' (timing.Prices).
type lowering struct {
	bufs   [profilePrograms]core.ProgramBuffers
	progs  [profilePrograms]*core.Program
	prices timing.Prices
	saved  replay.SavedScratch // the activations each program holds for backward (unitSaved)
	// blocks are the blocks the profile's programs lowered, for its
	// other programs to copy (core.BlockTemplates): each program lowered
	// its first block from scratch, though a profile's programs lower
	// the same plan at other pipeline and data degrees.
	blocks core.BlockTemplates
	// edges places the profiles' parameters at a pass's edge or in a
	// block, its model's blocks and names worked out once (aggParams).
	edges replay.EdgeClassifier
}

// newLowering is a goroutine's lowering lists, its copied blocks' names
// kept in names (nil: a table of each slot's own).
func newLowering(names *core.NameTable) *lowering {
	lw := &lowering{}
	for i := range lw.bufs {
		lw.bufs[i].Names, lw.bufs[i].Recall = names, true // a slot lowers the same model profile after profile
		lw.bufs[i].Templates = &lw.blocks
	}
	return lw
}

// lower lowers p with model m and layout par into slot's lists and holds
// the program there.
func (lw *lowering) lower(slot int, p *core.Plan, m *core.Model, par core.Parallelism, stage *core.StageSpec, room core.ProgramSize) (*core.Program, error) {
	prog, err := lowerWith(p, m, par, stage, room, &lw.bufs[slot])
	lw.progs[slot] = prog
	return prog, err
}

// release gives the held programs' lists back to their slots for the
// next profile: they are not read any more.
func (lw *lowering) release() {
	for i, prog := range lw.progs {
		lw.bufs[i].Recycle(prog)
		lw.progs[i] = nil
	}
}

// newProfile lowers and prices the units parts of plan p's
// configuration. p's layout gives the tensor, context and expert
// degrees; data and pipeline parallelism do not change a unit.
func newProfile(p *core.Plan, parts profileParts) (*profile, error) {
	lw := newLowering(nil)
	defer lw.release()
	pr, err := newProfileIn(p, parts, lw)
	if err != nil {
		return nil, err
	}
	pr.price(lw)
	return pr, nil
}

// newProfileIn lowers the units parts of plan p's configuration into lw
// (one goroutine's: Run's workers each have their own), which holds the
// programs until lw.release, and sums what the memory bound reads: the
// profile's units hold their parameters and the activations held for
// backward; price, before release, sums the rest.
func newProfileIn(p *core.Plan, parts profileParts, lw *lowering) (*profile, error) {
	lw.blocks.Reset()                        // another plan's blocks: none would match
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	// The plan's own layout without its pipeline: what the lowering reads
	// (tensor, context and expert degrees, sequence parallelism, FSDP's
	// casts, whether the plan is distributed at all) stays.
	one := p.Parallel.Norm()
	dp := one.DP
	one.DP *= one.PP
	one.PP, one.VirtualStages, one.Schedule, one.MicroBatches = 1, 1, "1f1b", 0
	one.EmbeddingSlot, one.LossSlot = false, false // the stages' split is the shape's (search_estimate.go)
	m1, n := withBlocks(p.Model, 1)
	pr := &profile{plan: p, parts: parts, n: n, mixed: n == 0 && blockCount(p.Model) > 0}
	var mem [profilePrograms]unitSums // each program's activations held for backward
	var blockP, baseP paramAgg        // a block's parameters, and the rest of the model's
	var room core.ProgramSize
	if parts&flatUnits != 0 {
		p1, err := lw.lower(oneBlockSlot, p, m1, one, nil, core.ProgramSize{})
		if err != nil {
			return nil, err
		}
		mem[oneBlockSlot].saved = unitSaved(p1, p, &lw.saved)
		if n == 0 {
			mem[oneBlockSlot].params = aggParams(p1.Params, p, &lw.edges)
			pr.sum(&mem)
			return pr, nil
		}
		m2, _ := withBlocks(p.Model, 2)
		// The other models hold at most twice the one-block model's lists
		// (two blocks, or a stage of up to two blocks with the layers around).
		room = p1.Size().Times(2)
		p2, err := lw.lower(twoBlockSlot, p, m2, one, nil, room)
		if err != nil {
			return nil, err
		}
		mem[twoBlockSlot].saved = unitSaved(p2, p, &lw.saved)
		bp, basep, err := blockParams(p1.Params, p2.Params)
		if err != nil {
			return nil, err
		}
		blockP, baseP = aggParams(bp, p, &lw.edges), aggParams(basep, p, &lw.edges)
	}
	if n == 0 || parts&stageUnits == 0 { // a mixed model's pipeline lowers its chunks whole (lowerChunks)
		pr.sum(&mem)
		if n > 0 {
			pr.block.params, pr.base.params = blockP, baseP
		}
		return pr, nil
	}

	// Three stages of one block each, and of two: the first chunk, a
	// middle one and the last, and what one block adds to each.
	var sp [3][]core.ParamInfo
	for b := int64(1); b <= 2; b++ {
		m3, _ := withBlocks(p.Model, 3*b)
		three := one
		three.DP = dp
		three.PP = 3
		split, err := core.SplitStages(m3, three)
		if err != nil {
			return nil, err
		}
		for s := int64(0); s < 3; s++ {
			slot := stageSlot + 3*int(b-1) + int(s)
			prog, err := lw.lower(slot, p, m3, three, &core.StageSpec{Stage: s, Inflight: 1, Chunks: []int64{s}, Split: split}, room)
			if err != nil {
				return nil, err
			}
			if room == (core.ProgramSize{}) {
				// The others hold at most twice the first's lists and
				// the last's layers after the blocks.
				room = prog.Size().Times(3)
			}
			mem[slot].saved = unitSaved(prog, p, &lw.saved)
			if b == 1 {
				sp[s] = untiedView(prog.Params) // read below, while lw holds prog
			}
		}
	}
	// A block's parameters: the middle stage of one block holds just
	// them.
	k := len(sp[1])
	if parts&flatUnits == 0 {
		blockP = aggParams(sp[1], p, &lw.edges)
	}
	if blockP.count() != int64(k) || len(sp[0]) < k || len(sp[2]) < k {
		return nil, fmt.Errorf("internal error: pipeline stage profile holds %d, %d, %d parameters for blocks of %d", len(sp[0]), len(sp[1]), len(sp[2]), blockP.count())
	}
	pr.sum(&mem)
	pr.block.params, pr.base.params = blockP, baseP
	for c := range pr.chunks {
		pr.chunks[c].block.params = pr.block.params
	}
	pr.chunks[firstChunk].base.params = aggParams(sp[0][:len(sp[0])-k], p, &lw.edges)
	pr.chunks[lastChunk].base.params = aggParams(sp[2][k:], p, &lw.edges)
	return pr, nil
}

// sum sets the profile's units from its programs' (u, by slot): a block
// is the two-block model less the one-block model, the rest of the model
// the one-block model less a block, and each chunk kind's the same of the
// stages of two and of one block. unitSums.add works out each figure and
// list from the same one of its operands alone (the parameters only for
// a whole positive count, which a difference is not), so summing
// programs that hold some figures sets those figures as summing whole
// programs would, and the others to zero.
func (pr *profile) sum(u *[profilePrograms]unitSums) {
	if pr.parts&flatUnits != 0 {
		if pr.n == 0 {
			pr.base = u[oneBlockSlot]
			return
		}
		pr.block = u[twoBlockSlot].add(u[oneBlockSlot], -1)
		pr.base = u[oneBlockSlot].add(pr.block, -1)
	}
	if pr.n == 0 || pr.parts&stageUnits == 0 {
		return
	}
	for c := range pr.chunks {
		one, two := &u[stageSlot+c], &u[stageSlot+3+c]
		blk := two.add(*one, -1)
		pr.chunks[c] = chunkUnits{base: one.add(blk, -1), block: blk}
	}
}

// price sums the profile's times, FLOPs and collectives from its
// programs, which lw holds since newProfileIn. The parameters and the
// activations held for backward, which the memory bound has read, stay
// as newProfileIn set them: sum sets the others alone (its comment).
func (pr *profile) price(lw *lowering) {
	var u [profilePrograms]unitSums
	for slot, prog := range lw.progs {
		if prog != nil {
			u[slot] = unitTime(prog, pr.plan, &lw.prices)
		}
	}
	units := []*unitSums{&pr.base, &pr.block}
	for c := range pr.chunks {
		units = append(units, &pr.chunks[c].base, &pr.chunks[c].block)
	}
	type memory struct {
		saved  int64
		params paramAgg
	}
	var kept [2 + 2*len(pr.chunks)]memory
	for i, x := range units {
		kept[i] = memory{x.saved, x.params}
	}
	pr.sum(&u)
	for i, x := range units {
		x.saved, x.params = kept[i].saved, kept[i].params
	}
	pr.priced = true
	pr.tp = pr.tpExposure()
}
