package search

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/timing"
)

// The walk's lower bound of a step time (stepBound) is the micro-batches
// times the slowest stage's micro-batch, of which it knows the compute
// (forward, backward, recompute) and, from here, what the stage's
// tensor-parallel collectives leave exposed: the time model's tp_comm
// row, the largest of its exposed communication in a tensor-parallel
// search (BenchmarkSearchLlama70B1024: 0.6 s of a 8.6 s step at tp 4,
// 7 s of 15 s at tp 32, beside 7.5 s of compute). With the compute alone
// the bound of a layout was up to 5 times below its step time, the walk
// met it that much earlier and worked out its step time while the front
// had not yet reached the memory that later ruled it out: 8,796 of the
// 8,920 step times it worked out were of layouts then dominated.

// tpSecs is what one unit's tensor-parallel collectives leave exposed
// (timing.TPExposed): the forward's, which the time model counts
// 1 + recompute/forward times, and the backward's.
type tpSecs struct{ fwd, bwd float64 }

// profileTP is tpSecs of each of a profile's units.
type profileTP struct {
	base, block tpSecs
	chunks      [3]struct{ base, block tpSecs }
	ok          bool // set: every unit's counts are whole and not negative
}

// tpExposure is tpSecs of each of pr's units, in the group of pr's plan.
// Every layout of the profile has that group: tensor parallelism is a
// profile's, its ranks are consecutive (timing's Megatron rank order,
// tp fastest) and the cluster is the search's, so its collectives take
// the times they take in pr's plan (TestSearchTPBoundPerLayout).
func (pr *profile) tpExposure() profileTP {
	t := profileTP{ok: true}
	of := func(u *unitSums) tpSecs {
		for _, c := range u.comm {
			if c.Group == "tp" && (c.N < 0 || c.N != float64(int64(c.N))) {
				t.ok = false // stepBound's sum over a stage's units holds for counts of collectives only
			}
		}
		f, b := timing.TPExposed(pr.plan, u.comm)
		return tpSecs{f, b}
	}
	t.base, t.block = of(&pr.base), of(&pr.block)
	for c := range pr.chunks {
		t.chunks[c].base, t.chunks[c].block = of(&pr.chunks[c].base), of(&pr.chunks[c].block)
	}
	return t
}

// stageTP is what the collectives of sh's distinct stage k leave exposed
// in the time model's tp_comm row (GpuWork.Times), in exact arithmetic:
// the stage's collectives are its units' with their counts added
// (stageUnits, unitSums.add), and a collective's exposed time is its
// count times that of one (timing's commCtx.exposed), so the row is the
// units' exposed times times their counts. 0 where the profile's units
// do not sum so (a mixed model's stages, lowered whole).
func (pr *profile) stageTP(p *core.Plan, sh *stageShape, k int, c *timing.ComputeTime) float64 {
	if !pr.tp.ok || pr.mixed {
		return 0
	}
	var s tpSecs
	add := func(u tpSecs, n float64) {
		s.fwd += n * u.fwd
		s.bwd += n * u.bwd
	}
	switch {
	case sh.pp <= 1:
		add(pr.tp.base, 1)
		add(pr.tp.block, float64(pr.n))
	case sh.chunks == nil:
		return 0
	default:
		for _, ck := range sh.chunks[k] {
			add(pr.tp.chunks[ck.kind].base, 1)
			add(pr.tp.chunks[ck.kind].block, float64(ck.blocks))
		}
	}
	rf := 0.0
	if c.Forward > 0 {
		rf = c.Recompute / c.Forward
	}
	if p.Phase == core.Eval {
		return s.fwd * (1 + rf)
	}
	return s.fwd*(1+rf) + s.bwd
}
