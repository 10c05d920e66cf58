package search

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// Block profiles: the fast path of Search. A decoder's step is its
// repeated block many times over, so the time model's inputs (compute
// per op, FLOPs, collectives, parameters, activations held for backward)
// are sums over a few kinds of unit: the layers before the blocks, one
// block, the layers after them with the output layer and loss, and, on a
// pipeline stage, the activation received from the previous stage. A
// profile lowers each kind once, on a model cut down to one or two blocks
// (three for pipeline stages), and a layout's figures are those units
// times their counts. The equality of this path with the full replay is
// tested on a set of plans (search_test.go).

// unitSums is what one unit contributes to a micro-batch of one GPU.
type unitSums struct {
	ct       timing.ComputeTime // Optimizer unused
	attn     float64
	fwdFlops float64
	mdlFlops float64 // model FLOPs of a training pass (core.Program.OpModelFlops)
	recFlops float64
	comm     []timing.CommSum
	params   paramAgg // untied parameters
	saved    int64    // activation bytes held for backward at the end of the forward
}

// paramEntry is n parameters alike for the sums the fast path needs.
type paramEntry struct {
	numel     int64
	traffic   int64 // optimizer step's HBM traffic (replay.optimizerTraffic)
	expert    bool
	trainable bool
	n         int64
	// A quantized frozen weight's storage (quant=), which the memory
	// bound counts instead of numel in the parameters' dtype: whole, as
	// one GPU and DDP or ZeRO-1/2 hold it (core.QuantBytes, replay's
	// quant.go), and as ZeRO-3 and FSDP split it, the codes split over
	// the ranks and the statistics kept whole (core.QuantTensors,
	// replay's quant_shard.go). quantWhole is 0 for a weight in the
	// parameters' dtype.
	quantWhole, quantSplit, quantKept int64
}

// paramAgg is a multiset of parameters.
type paramAgg []paramEntry

// aggParams counts the untied parameters of ps, as plan p steps them.
func aggParams(ps []core.ParamInfo, p *core.Plan) paramAgg {
	r := &replay.Replay{Plan: p}
	var a paramAgg
	// The optimizer's traffic of a parameter depends on its shape and
	// element count alone (replay's OptimizerTraffic), and a unit's
	// parameters have few shapes (a block's projections and norms): each
	// is worked out once (it lists the optimizer's state tensors anew).
	type shapeTraffic struct {
		shape          []int64
		numel, traffic int64
	}
	var room [16]shapeTraffic
	traffics := room[:0]
	for i := range ps {
		q := &ps[i]
		if q.TiedTo >= 0 {
			continue
		}
		e := paramEntry{numel: q.Numel, expert: replay.IsExpertRole(q.Role), trainable: q.Trainable, n: 1}
		if q.Quant != "" {
			e.quantWhole = core.QuantBytes(q.Quant, q.Shape)
			for _, t := range core.QuantTensors(q.Quant, q.Shape, p.QuantStorage, p.Precision.Params) {
				if t.Sharded {
					e.quantSplit += t.Bytes()
				} else {
					e.quantKept += t.Bytes()
				}
			}
		}
		if q.Trainable {
			found := false
			for _, t := range traffics {
				if t.numel == q.Numel && slices.Equal(t.shape, q.Shape) {
					e.traffic, found = t.traffic, true
					break
				}
			}
			if !found {
				e.traffic = r.OptimizerTraffic(q)
				traffics = append(traffics, shapeTraffic{q.Shape, q.Numel, e.traffic})
			}
		}
		a = a.merge(paramAgg{e}, 1) // in place: a is aggParams' own
	}
	return a
}

// add returns a + k*b (a new multiset when b is not empty).
func (a paramAgg) add(b paramAgg, k int64) paramAgg {
	if len(b) == 0 || k == 0 {
		return a
	}
	out := make(paramAgg, len(a), len(a)+len(b))
	copy(out, a)
	return out.merge(b, k)
}

// merge adds k times each of b to a, in place.
func (a paramAgg) merge(b paramAgg, k int64) paramAgg {
	for _, e := range b {
		found := false
		for i := range a {
			o := &a[i]
			if o.numel == e.numel && o.traffic == e.traffic && o.expert == e.expert && o.trainable == e.trainable &&
				o.quantWhole == e.quantWhole && o.quantSplit == e.quantSplit && o.quantKept == e.quantKept {
				o.n += k * e.n
				found = true
				break
			}
		}
		if !found {
			e.n *= k
			a = append(a, e)
		}
	}
	return a
}

// count is the parameters of a.
func (a paramAgg) count() int64 {
	var n int64
	for _, e := range a {
		n += e.n
	}
	return n
}

// numel sums the elements of the trainable (or frozen) dense and expert
// parameters.
func (a paramAgg) numel(trainable bool) (dense, expert int64) {
	for _, e := range a {
		if e.trainable != trainable {
			continue
		}
		if e.expert {
			expert += e.n * e.numel
		} else {
			dense += e.n * e.numel
		}
	}
	return dense, expert
}

// add returns u + k*v; parameters are added for whole positive k (a
// difference of units sets its parameters itself). Its slices are new or
// shared, never written: zero + 1*v is v itself (every sum is exact: 0 +
// 1*x is x, and v's lists hold no zero count and no two entries alike,
// as add and SumComm leave them).
func (u unitSums) add(v unitSums, k float64) unitSums {
	if k == 1 && u.zero() {
		return v
	}
	u = u.addScalars(v, k)
	if k > 0 && k == float64(int64(k)) {
		u.params = u.params.add(v.params, int64(k))
	}
	if len(v.comm) > 0 && k != 0 {
		sums := make([]timing.CommSum, len(u.comm), len(u.comm)+len(v.comm))
		copy(sums, u.comm)
		sums = mergeComm(sums, v.comm, k)
		u.comm = sums[:0]
		for _, c := range sums {
			if c.N != 0 {
				u.comm = append(u.comm, c)
			}
		}
		timing.SortComm(u.comm)
	}
	return u
}

// addScalars is add's figures without its lists: u's lists are kept.
func (u unitSums) addScalars(v unitSums, k float64) unitSums {
	u.ct = u.ct.Plus(v.ct, k)
	u.attn += k * v.attn
	u.fwdFlops += k * v.fwdFlops
	u.mdlFlops += k * v.mdlFlops
	u.recFlops += k * v.recFlops
	u.saved += int64(k) * v.saved
	return u
}

// zero says whether u is the zero value (a sum not begun).
func (u *unitSums) zero() bool {
	return u.ct == timing.ComputeTime{} && u.attn == 0 && u.fwdFlops == 0 && u.mdlFlops == 0 && u.recFlops == 0 &&
		len(u.comm) == 0 && len(u.params) == 0 && u.saved == 0
}

// unitOf sums a lowered program the way the time model reads it (every
// checkpoint region recomputed in training, allRedone) and the memory
// bound reads it (activations held for backward, as the replay marks
// them). Its ops are priced in prices' lists (nil: lists of its own).
func unitOf(prog *core.Program, plan *core.Plan, prices *timing.Prices) unitSums {
	var u unitSums
	train := plan.Phase != core.Eval
	if prices == nil {
		prices = &timing.Prices{}
	}
	costs := prices.Of(prog, plan)
	for i := range prog.Ops {
		op, c := &prog.Ops[i], &costs[i]
		u.ct.Forward += c.Fwd
		u.ct.ForwardCPU += c.FwdCPU
		u.fwdFlops += op.Flops
		u.mdlFlops += prog.OpModelFlops(i)
		if train {
			u.ct.Backward += c.Bwd
			u.ct.BackwardCPU += c.BwdCPU
		}
		if c.Attention {
			u.attn += c.Fwd
			if train {
				u.attn += c.Bwd
			}
		}
		// A checkpoint policy's kept outputs are not run again: the time
		// model skips them (timing.computeTime), the replay's FLOPs too
		// where the region records a graph (replay.keeps).
		if op.Region != 0 && train && !op.Keep {
			u.ct.Recompute += c.Fwd
			u.ct.RecomputeCPU += c.FwdCPU
			if c.Attention {
				u.attn += c.Fwd
			}
		}
		if op.Region != 0 && train && !(op.Keep && !prog.Regions[op.Region-1].NoGrad) {
			u.recFlops += op.Flops
		}
	}
	u.comm = timing.SumCommOf(prog, plan, costs)
	if !train {
		kept := u.comm[:0]
		for _, c := range u.comm {
			if !c.Backward {
				kept = append(kept, c)
			}
		}
		u.comm = kept
	}
	u.params = aggParams(prog.Params, plan)
	if train {
		for v, s := range replay.SavedAtForwardEnd(prog, plan) {
			if s && prog.Values[v].Cat == core.CatActivations {
				u.saved += prog.Values[v].Bytes
			}
		}
	}
	return u
}

// profile is the units of one lowering configuration (tensor, context and
// expert parallelism, micro-batch, checkpointing).
type profile struct {
	plan  *core.Plan   // the configuration's plan (as the replay runs it)
	parts profileParts // the units lowered
	mixed bool         // the blocks differ (core.Repeat.Blocks): no block unit, a pipeline's chunks are lowered whole
	n     int64        // blocks in the model; 0 without a repeat() to split, or with mixed blocks
	block unitSums     // one block
	base  unitSums     // the model without its blocks (one GPU, no pipeline)
	// chunks: a pipeline's model chunks of each kind (first, middle,
	// last): the chunk without its blocks (the batch and the layers
	// before; an activation received; a receive, the layers after, the
	// output layer and loss) and one of its blocks, which on a stage may
	// differ from block (the dtype of the activation a stage receives).
	chunks [3]chunkUnits
}

// chunkUnits is a pipeline chunk kind's units.
type chunkUnits struct{ base, block unitSums }

// The chunk kinds.
const (
	firstChunk = iota
	middleChunk
	lastChunk
)

// blockCount is the blocks of m's largest repeat() a pipeline splits (0
// without one).
func blockCount(m *core.Model) int64 {
	s, err := core.SplitStages(m, core.Parallelism{})
	if err != nil {
		return 0
	}
	return int64(len(s.Blocks))
}

// withBlocks returns m with its largest repeat() cut to k blocks (the
// sequentials on the way copied, the blocks shared) and that repeat's
// block count, or m itself and 0 when it has no repeat.
func withBlocks(m *core.Model, k int64) (*core.Model, int64) {
	target, err := core.SplitRepeat(m) // SplitStages' repeat, its blocks not listed
	if err != nil || target.Count() == 0 {
		return m, 0
	}
	if target.Blocks != nil {
		return m, 0 // blocks that differ do not extrapolate from k of them
	}
	var cut func(ls []core.Layer) []core.Layer
	cut = func(ls []core.Layer) []core.Layer {
		out := make([]core.Layer, len(ls))
		for i, l := range ls {
			switch x := l.(type) {
			case *core.Repeat:
				if x == target {
					r := *x
					r.N = k
					out[i] = &r
					continue
				}
			case *core.Sequential:
				if core.ContainsLayer(x, target) {
					c := *x
					c.Layers = cut(x.Layers)
					out[i] = &c
					continue
				}
			}
			out[i] = l
		}
		return out
	}
	c := *m
	c.Layers = cut(m.Layers)
	return &c, target.N
}

// lowerWith lowers plan p with model m and layout par (one GPU of it),
// with room for the lists of a program of size room, into bufs' lists
// (nil: lists of its own).
func lowerWith(p *core.Plan, m *core.Model, par core.Parallelism, stage *core.StageSpec, room core.ProgramSize, bufs *core.ProgramBuffers) (*core.Program, error) {
	q := *p
	q.Model, q.Parallel, q.PipeStage = m, par, stage
	return q.LowerProgramInto(room, bufs)
}

// profileParts are the units a profile lowers: those of layouts without a
// pipeline (the one- and two-block models), of pipelined layouts (the
// three-stage pipelines), or both. A configuration's layouts may need
// only one kind.
type profileParts uint8

const (
	flatUnits profileParts = 1 << iota
	stageUnits
)

// partsFor is the units a layout of par reads.
func partsFor(par core.Parallelism) profileParts {
	if par.Norm().PP > 1 {
		return stageUnits
	}
	return flatUnits
}

// newProfile lowers the units parts of plan p's configuration. p's
// layout gives the tensor, context and expert degrees; data and pipeline
// parallelism do not change a unit.
func newProfile(p *core.Plan, parts profileParts) (*profile, error) {
	return newProfileIn(p, parts, &lowering{})
}

// lowering is one goroutine's lists for the profiles it lowers: its
// programs' (core.ProgramBuffers) and their prices' (timing.Prices).
type lowering struct {
	bufs   core.ProgramBuffers
	prices timing.Prices
}

// newProfileIn is newProfile lowering into lw's lists (one goroutine's:
// Run's workers each have their own); each program's lists go back to
// lw once its units are summed (unitOf and untied copy what they keep).
func newProfileIn(p *core.Plan, parts profileParts, lw *lowering) (*profile, error) {
	bufs, prices := &lw.bufs, &lw.prices
	if q, ok := p.DeepspeedPrecision(); ok { // as evaluatePipeline runs it
		p = q
	}
	// The plan's own layout without its pipeline: what the lowering reads
	// (tensor, context and expert degrees, sequence parallelism, FSDP's
	// casts, whether the plan is distributed at all) stays.
	one := p.Parallel.Norm()
	one.DP *= one.PP
	one.PP, one.VirtualStages, one.Schedule, one.MicroBatches = 1, 1, "1f1b", 0
	one.EmbeddingSlot, one.LossSlot = false, false // the stages' split is the shape's (search_estimate.go)
	m1, n := withBlocks(p.Model, 1)
	pr := &profile{plan: p, parts: parts, n: n, mixed: n == 0 && blockCount(p.Model) > 0}
	var room core.ProgramSize
	if parts&flatUnits != 0 {
		p1, err := lowerWith(p, m1, one, nil, core.ProgramSize{}, bufs)
		if err != nil {
			return nil, err
		}
		u1 := unitOf(p1, p, prices)
		if n == 0 {
			pr.base = u1
			bufs.Recycle(p1)
			return pr, nil
		}
		m2, _ := withBlocks(p.Model, 2)
		// The other models hold at most twice the one-block model's lists
		// (two blocks, or a stage of up to two blocks with the layers around).
		room = p1.Size().Times(2)
		p2, err := lowerWith(p, m2, one, nil, room, bufs)
		if err != nil {
			return nil, err
		}
		u2 := unitOf(p2, p, prices)
		pr.block = u2.add(u1, -1)
		pr.base = u1.add(pr.block, -1)
		bp, basep, err := blockParams(p1.Params, p2.Params)
		if err != nil {
			return nil, err
		}
		bufs.Recycle(p1)
		bufs.Recycle(p2)
		pr.block.params, pr.base.params = aggParams(bp, p), aggParams(basep, p)
	}
	if n == 0 || parts&stageUnits == 0 {
		return pr, nil // a mixed model's pipeline lowers its chunks whole (lowerChunks)
	}

	// Three stages of one block each, and of two: the first chunk, a
	// middle one and the last, and what one block adds to each.
	var st [2][3]unitSums
	var sp [3][]core.ParamInfo
	for b := int64(1); b <= 2; b++ {
		m3, _ := withBlocks(p.Model, 3*b)
		three := one
		three.DP = p.Parallel.Norm().DP
		three.PP = 3
		split, err := core.SplitStages(m3, three)
		if err != nil {
			return nil, err
		}
		for s := int64(0); s < 3; s++ {
			prog, err := lowerWith(p, m3, three, &core.StageSpec{Stage: s, Inflight: 1, Chunks: []int64{s}, Split: split}, room, bufs)
			if err != nil {
				return nil, err
			}
			if room == (core.ProgramSize{}) {
				// The others hold at most twice the first's lists and
				// the last's layers after the blocks.
				room = prog.Size().Times(3)
			}
			st[b-1][s] = unitOf(prog, p, prices)
			if b == 1 {
				sp[s] = untied(prog.Params)
			}
			bufs.Recycle(prog)
		}
	}
	// A block's parameters: the middle stage of one block holds just
	// them.
	k := len(sp[1])
	if parts&flatUnits == 0 {
		pr.block.params = aggParams(sp[1], p)
	}
	if pr.block.params.count() != int64(k) || len(sp[0]) < k || len(sp[2]) < k {
		return nil, fmt.Errorf("internal error: pipeline stage profile holds %d, %d, %d parameters for blocks of %d", len(sp[0]), len(sp[1]), len(sp[2]), pr.block.params.count())
	}
	for c := range pr.chunks {
		blk := st[1][c].add(st[0][c], -1)
		blk.params = pr.block.params
		base := st[0][c].add(blk, -1)
		base.params = nil
		pr.chunks[c] = chunkUnits{base: base, block: blk}
	}
	pr.chunks[firstChunk].base.params = aggParams(sp[0][:len(sp[0])-k], p)
	pr.chunks[lastChunk].base.params = aggParams(sp[2][k:], p)
	return pr, nil
}

// blockParams splits the parameters of the one-block model (p1) and the
// two-block model (p2): the second block's (those p2 adds where p1's
// layers after the blocks start) and the one-block model's less its block
// (the block sits just before that point in p1).
func blockParams(p1, p2 []core.ParamInfo) (block, base []core.ParamInfo, err error) {
	k := len(p2) - len(p1)
	i0 := 0
	for i0 < len(p1) && p1[i0].Name == p2[i0].Name {
		i0++
	}
	if k <= 0 || i0+k > len(p2) || i0 < k {
		return nil, nil, fmt.Errorf("internal error: cannot find the parameters of one block (%d and %d parameters)", len(p1), len(p2))
	}
	block = untied(p2[i0 : i0+k])
	base = append(untied(p1[:i0-k]), untied(p1[i0:])...)
	return block, base, nil
}

func untied(ps []core.ParamInfo) []core.ParamInfo {
	out := make([]core.ParamInfo, 0, len(ps))
	for _, p := range ps {
		if p.TiedTo < 0 {
			out = append(out, p)
		}
	}
	return out
}
