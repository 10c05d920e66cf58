package sim

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// The checkpoint budget solver: checkpoint(budget=...) asks for the least
// recompute time whose memory stays within a budget, the question
// PyTorch's SAC ILP (torch.distributed._tools.sac_ilp.sac_milp: per-module
// recompute choices under a peak-memory budget) and the partitioner's
// activation_memory_budget (torch/_functorch/config.py: 0 the memory of
// full checkpointing, 1 of none, a knapsack for the least recompute in
// between) answer. Here each repeated block takes one of blockOptions;
// what a block keeps for backward and what its recompute costs under each
// option are read off the plan lowered with that option everywhere (the
// storages held at the end of the forward, attributed to the block of
// the op or checkpoint region that holds them; the time model's price of
// the region's forward ops). The choice is an exact multiple-choice
// knapsack: the Pareto front of (bytes kept, recompute time) over the
// blocks, built block by block, dropping only dominated partial sums
// (knapsack.go; checked against brute force). A fraction budget takes the
// front's cheapest point within the mix of bytes; a bytes budget the
// cheapest point whose replay fits, by bisection on the front.

// blockOptions are what the solver may choose for one block, least
// memory last. A new policy (per-op selective checkpointing) is one entry.
var blockOptions = []core.Checkpoint{
	{Mode: "none"},
	{Mode: "selective", Selective: true},
	{Mode: "modules", Modules: []string{"attention"}},
	{Mode: "modules", Modules: []string{"mlp"}},
	{Mode: "full", Every: 1},
	{Mode: "op", Save: core.DefaultSaveOps()}, // torchtitan's per-op policy: matmul and attention outputs kept
}

// fullOption is the index of full checkpointing in blockOptions, noneOption
// of none.
const (
	noneOption = 0
	fullOption = 4
)

// blockCosts are the knapsack's items: for each block and option, the
// bytes the block keeps for backward and its recompute seconds per step.
type blockCosts struct {
	bytes [][]int64   // [block][option]
	secs  [][]float64 // [block][option]
}

// solveBudget resolves plan's checkpoint(budget=...) into one policy per
// block; the notes say what it chose and why.
func solveBudget(plan *core.Plan, opts core.Options) (*core.Plan, []string, error) {
	b := plan.Checkpoint.Budget
	if err := b.Validate(); err != nil {
		return nil, nil, &units.Error{Path: "checkpoint", Msg: err.Error()}
	}
	if plan.Parallel.Norm().PP > 1 {
		return nil, nil, &units.Error{Path: "checkpoint", Msg: "checkpoint(budget=...) is solved for plans without pipeline stages",
			Hint: "each stage holds a different number of micro-batches: give the stages a policy, checkpoint(\"full\") or checkpoint(every=k)"}
	}
	costs, err := measureBlocks(plan)
	if err != nil {
		return nil, nil, err
	}
	front := paretoFront(costs)
	pick := 0      // the front's point: index into front, most memory last
	tight := false // a bytes budget that not even the least memory meets
	switch {
	case b.Bytes == 0:
		var lo, hi int64
		for _, row := range costs.bytes {
			lo += row[fullOption]
			hi += row[noneOption]
		}
		limit := lo + int64(b.Fraction*float64(hi-lo))
		pick = sort.Search(len(front), func(i int) bool { return front[i].bytes > limit }) - 1
		pick = max(pick, 0)
	default:
		// The largest point on the front whose replay fits: memory grows
		// along the front, so bisection finds it.
		fits := func(i int) (bool, error) {
			rep, err := Evaluate(withChoice(plan, front[i].choice), opts)
			if err != nil {
				return false, err
			}
			return rep.Fits && rep.DeviceUsed <= b.Bytes, nil
		}
		lo, hi := 0, len(front) // front[lo-1] fits (or lo is 0), front[hi] does not
		for lo < hi {
			mid := (lo + hi) / 2
			ok, err := fits(mid)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		pick, tight = max(lo-1, 0), lo == 0 // lo == 0: point 0 was tried last, and did not fit
	}
	p := front[pick]
	q := withChoice(plan, p.choice)
	var all int64
	for _, row := range costs.bytes {
		all += row[noneOption]
	}
	note := fmt.Sprintf("%s chose %s: the blocks keep %s of the %s they keep unchecked, for %s of recompute per step, the least on the exact Pareto front of %d points",
		plan.Checkpoint, q.Checkpoint, units.FormatBytes(p.bytes), units.FormatBytes(all), secondsText(p.secs), len(front))
	if tight {
		note += fmt.Sprintf(" (no point fits %s: this is the least memory)", units.FormatBytes(b.Bytes))
	}
	return q, []string{note}, nil
}

// withChoice is plan with choice[i] the option of block i.
func withChoice(plan *core.Plan, choice []int) *core.Plan {
	q := *plan
	blocks := make([]core.Checkpoint, len(choice))
	for i, o := range choice {
		blocks[i] = blockOptions[o]
	}
	q.Checkpoint = core.Checkpoint{Mode: "blocks", Blocks: blocks, Reentrant: plan.Checkpoint.Reentrant,
		NoEarlyStop: plan.Checkpoint.NoEarlyStop, Budget: plan.Checkpoint.Budget}
	return &q
}

// measureBlocks lowers the plan with each option in every block and reads
// off what each block keeps for backward and what its recompute costs.
func measureBlocks(plan *core.Plan) (*blockCosts, error) {
	c := &blockCosts{}
	for o, opt := range blockOptions {
		q := *plan
		q.Checkpoint = opt
		q.Checkpoint.Reentrant, q.Checkpoint.NoEarlyStop = plan.Checkpoint.Reentrant, plan.Checkpoint.NoEarlyStop
		prog, err := q.LowerProgram()
		if err != nil {
			return nil, err
		}
		n := 0
		for i := range prog.Ops {
			n = max(n, int(prog.Ops[i].Block))
		}
		if n == 0 {
			return nil, &units.Error{Path: "checkpoint", Msg: fmt.Sprintf("checkpoint(budget=...) chooses per repeated block, and model %q has none", plan.Model.Name),
				Hint: "build the model with repeat(); checkpoint(modules=[...]) checkpoints named layers"}
		}
		if c.bytes == nil {
			c.bytes, c.secs = make([][]int64, n), make([][]float64, n)
			for i := range c.bytes {
				c.bytes[i], c.secs[i] = make([]int64, len(blockOptions)), make([]float64, len(blockOptions))
			}
		} else if n != len(c.bytes) {
			return nil, fmt.Errorf("internal error: %d blocks with checkpoint %s, %d with none", n, opt, len(c.bytes))
		}
		held := heldBy(prog, &q)
		for v, op := range held {
			if op >= 0 {
				if blk := prog.Ops[op].Block; blk > 0 {
					c.bytes[blk-1][o] += prog.Values[v].Bytes
				}
			}
		}
		costs := timing.PriceOps(prog, &q)
		per := float64(q.MicroBatches())
		for k, reg := range prog.Regions {
			blk := prog.Ops[reg.First].Block
			if blk == 0 || reg.NoGrad {
				continue
			}
			for j, end := reg.First, prog.RecomputeEnd(int32(k+1)); j < end; j++ { // its early stop (core/model_flops.go)
				c.secs[blk-1][o] += per * costs[j].Fwd
			}
		}
	}
	return c, nil
}

// heldBy is, for each value the replay keeps for backward at the end of
// the forward (replay.NewReplay's Saved), the first op that holds it: an
// op outside checkpoint regions that saves it, an op whose outputs a
// per-op policy keeps, or the first op of a region it enters; -1 for the
// rest.
func heldBy(prog *core.Program, plan *core.Plan) []int32 {
	saved := replay.SavedAtForwardEnd(prog, plan)
	out := make([]int32, len(prog.Values))
	for v := range out {
		out[v] = -1
	}
	hold := func(v core.Value, op int32) {
		if saved[v] && out[v] < 0 {
			out[v] = op
		}
	}
	for i := range prog.Ops {
		op := &prog.Ops[i]
		if op.Region == 0 {
			for _, v := range op.Saved {
				hold(v, int32(i))
			}
			continue
		}
		reg := prog.Regions[op.Region-1]
		if op.Keep && !reg.NoGrad { // a per-op policy keeps its outputs from the forward
			for _, v := range op.Out {
				hold(v, int32(i))
			}
		}
		for _, v := range op.In {
			if pr := prog.Values[v].Producer; pr < 0 || prog.Ops[pr].Region != op.Region {
				hold(v, reg.First)
			}
		}
	}
	return out
}

// secondsText is s seconds to three figures.
func secondsText(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}
