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
	// root: FSDP's root unit holds it, gathered once a micro-batch where
	// the blocks are gathered again for their backward; edge3: ZeRO-3
	// gathers it at a pass's edge (replay.EdgeClassifier, ShardEdges). A
	// profile serves layouts of several shardings.
	root, edge3 bool
	n           int64
	// A quantized frozen weight's storage (quant=), which the memory
	// bound counts instead of numel in the parameters' dtype: whole, as
	// one GPU and DDP or ZeRO-1/2 hold it (core.QuantBytes, replay's
	// quant.go), and as ZeRO-3 and FSDP split it, the codes split over
	// the ranks and the statistics kept whole (core.QuantTensors,
	// replay's quant_shard.go). quantWhole is 0 for a weight in the
	// parameters' dtype.
	quantWhole, quantSplit, quantKept int64
	// quant and shape: a quantized weight's scheme and shape (the
	// profile's parameter's, shared, never written), from which replay
	// works out what a gather of it moves (QuantGatherBytes: the search's
	// stand-in program holds no quantized weight).
	quant string
	shape []int64
	// unread: no op of the profile's program reads it (a tower the step
	// does not run), so ZeRO-3 and FSDP2 never gather it; folded: FSDP1
	// gathers it all the same, flattened into a unit that runs
	// (replay.EdgeClassifier.FSDP1Folded).
	unread, folded bool
}

// paramAgg is a multiset of parameters.
type paramAgg []paramEntry

// aggParams counts the untied parameters of ps, as plan p steps them.
func aggParams(ps []core.ParamInfo, p *core.Plan, edges *replay.EdgeClassifier) paramAgg {
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
	roots, edges3 := edges.Params(p, ps)
	folded := edges.FSDP1Folded(p, ps)
	for i := range ps {
		q := &ps[i]
		if q.TiedTo >= 0 {
			continue
		}
		e := paramEntry{numel: q.Numel, expert: replay.IsExpertRole(q.Role), trainable: q.Trainable, root: roots[i], edge3: edges3[i], n: 1, unread: q.Unread}
		if folded != nil {
			e.folded = folded[i]
		}
		if q.Quant != "" {
			e.quant, e.shape = q.Quant, q.Shape
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
			if o.numel == e.numel && o.traffic == e.traffic && o.expert == e.expert && o.trainable == e.trainable && o.root == e.root && o.edge3 == e.edge3 &&
				o.quantWhole == e.quantWhole && o.quantSplit == e.quantSplit && o.quantKept == e.quantKept &&
				o.quant == e.quant && (e.quant == "" || slices.Equal(o.shape, e.shape)) && o.unread == e.unread && o.folded == e.folded {
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
	return a.numelIn(trainable, func(paramEntry) bool { return true })
}

// numelIn is numel of the parameters in picks.
func (a paramAgg) numelIn(trainable bool, picks func(paramEntry) bool) (dense, expert int64) {
	for _, e := range a {
		if e.trainable != trainable || !picks(e) {
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
		// Merged in a local list, then kept at the length the merge
		// leaves: a block's sum (two blocks less one) merges nearly every
		// collective, and the list made for both was twice as long as kept.
		var room [64]timing.CommSum
		sums := append(room[:0], u.comm...)
		sums = mergeComm(sums, v.comm, k)
		kept := sums[:0]
		for _, c := range sums {
			if c.N != 0 {
				kept = append(kept, c)
			}
		}
		timing.SortComm(kept)
		u.comm = append(make([]timing.CommSum, 0, len(kept)), kept...) // empty, not nil, when all cancel
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

// addFigures is u.add(v, k)'s figures (addScalars', or v's when u is a
// sum not begun and k is 1), its lists left as they come.
func (u unitSums) addFigures(v unitSums, k float64) unitSums {
	if k == 1 && u.zero() {
		return v
	}
	return u.addScalars(v, k)
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
// It is unitTime's figures with unitSaved's activations and the
// program's parameters.
func unitOf(prog *core.Program, plan *core.Plan, prices *timing.Prices) unitSums {
	u := unitTime(prog, plan, prices)
	u.params = aggParams(prog.Params, plan, &replay.EdgeClassifier{})
	u.saved = unitSaved(prog, plan, &replay.SavedScratch{})
	return u
}

// unitTime is unitOf without the parameters and the activations held
// for backward (the memory bound's figures, which do not need the
// program priced): the ops' times, FLOPs and collectives.
func unitTime(prog *core.Program, plan *core.Plan, prices *timing.Prices) unitSums {
	var u unitSums
	train := plan.Phase != core.Eval
	if prices == nil {
		prices = &timing.Prices{}
	}
	costs := prices.Of(prog, plan)
	ends := prog.RecomputeEnds(nil) // each region's early stop (core/model_flops.go)
	for i := range prog.Ops {
		op, c := &prog.Ops[i], &costs[i]
		redone := op.Region != 0 && int32(i) < ends[op.Region-1]
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
		if redone && train && !op.Keep {
			u.ct.Recompute += c.Fwd
			u.ct.RecomputeCPU += c.FwdCPU
			if c.Attention {
				u.attn += c.Fwd
			}
		}
		if redone && train && !(op.Keep && !prog.Regions[op.Region-1].NoGrad) {
			u.recFlops += op.Flops
		}
	}
	timing.SyncsOf(&u.ct, prog, costs, func(i int) bool { // as the recompute above
		return train && prog.Ops[i].Region != 0 && int32(i) < ends[prog.Ops[i].Region-1] && !prog.Ops[i].Keep
	})
	u.comm = prices.SumCommOf(prog, plan, costs)
	if !train {
		kept := u.comm[:0]
		for _, c := range u.comm {
			if !c.Backward {
				kept = append(kept, c)
			}
		}
		u.comm = kept
	}
	return u
}

// unitSaved is the activation bytes a lowered program holds for
// backward at the end of the forward, as the replay marks them (0 out
// of training), marked in scratch's lists.
func unitSaved(prog *core.Program, plan *core.Plan, scratch *replay.SavedScratch) int64 {
	if plan.Phase == core.Eval {
		return 0
	}
	var saved int64
	for v, s := range replay.SavedAtForwardEndIn(prog, plan, scratch) {
		if s && prog.Values[v].Cat == core.CatActivations {
			saved += prog.Values[v].Bytes
		}
	}
	return saved
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
	// priced says whether the units hold their times, FLOPs and
	// collectives (price); until then they hold the memory bound's
	// figures alone, the parameters and the activations held for
	// backward.
	priced bool
	// tp is what each unit's tensor-parallel collectives leave exposed
	// (tpExposure), set by price: the walk's lower bounds of the step
	// times add it to the compute (stepBound).
	tp profileTP
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
	if core.OrOne(par.PP) > 1 { // Norm's pp, without its copies
		return stageUnits
	}
	return flatUnits
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

// untied is ps without its tied parameters, in a list of its own.
func untied(ps []core.ParamInfo) []core.ParamInfo {
	out := make([]core.ParamInfo, 0, len(ps))
	for _, p := range ps {
		if p.TiedTo < 0 {
			out = append(out, p)
		}
	}
	return out
}

// untiedView is untied(ps), or ps itself when none of it is tied (a
// stage's parameters but a tied head's): the caller only reads it.
func untiedView(ps []core.ParamInfo) []core.ParamInfo {
	for i := range ps {
		if ps[i].TiedTo >= 0 {
			return untied(ps)
		}
	}
	return ps
}
