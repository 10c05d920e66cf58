package core

import (
	"cmp"
	"math"
	"slices"
)

// The activation memory budget of a compiled graph
// (torch._functorch.config.activation_memory_budget, torchtitan's
// MemoryBudgetAC, checkpoint(budget=b)): 1 saves what the partitioner
// picks on its own, 0 only the graph's inputs (the whole graph recomputed
// in the backward), and between them the partitioner trades recompute for
// memory (choose_saved_values_set, torch 2.15):
//
//  1. The runtime-optimized cut (budget 1) saves the most; the graph's
//     inputs the least. A budget b asks for at most min + b (max - min)
//     bytes.
//  2. If a cut with the "used far apart" and "materialized in backward"
//     bans lifted, or also the allowlist ban, saves little enough, it is
//     the answer.
//  3. Otherwise a 0-1 knapsack over the values the last cut still banned
//     (matmul and attention outputs, reductions, random ops; kept outputs
//     and the inputs excluded) picks the ones to save: weight their bytes
//     over max - min, value their FLOPs (PyTorch's flop counter: 2mnk for
//     a matmul, 4 b h s² d for attention whatever its mask, 1 for anything
//     else); the rest may be recomputed, and a last cut decides.

// compileBudget is the fraction a compiled graph's partitioner works to:
// a budget's fraction (package sim resolves a bytes budget to one before
// lowering).
func (c Checkpoint) compileBudget() (float64, bool) {
	return c.Budget.Fraction, c.Mode == "budget" && c.Budget.Bytes == 0
}

// budgetCut returns the saved values of the graph under budget b in [0, 1).
func (gv *graphView) budgetCut(b float64) (saved []bool, ok bool) {
	if b <= 0 {
		return gv.readByBackward(gv.input), true
	}
	best, _, ok := gv.cut(defaultPartition, nil)
	if !ok {
		return nil, false
	}
	all, read := gv.paramBytes()
	lo, hi := gv.bytesOf(gv.input)+all, gv.bytesOf(best)+read
	if hi <= lo {
		return gv.readByBackward(best), true
	}
	ratio := func(c []bool) float64 { return float64(gv.bytesOf(c)+read-lo) / float64(hi-lo) }
	more := defaultPartition
	more.usedFarApart, more.materializedBackward = false, false
	if c, _, ok := gv.cut(more, nil); ok && ratio(c) < b {
		return gv.readByBackward(c), true
	}
	aggressive := more
	aggressive.notInAllowlist = false
	c, ban, ok := gv.cut(aggressive, nil)
	if !ok {
		return nil, false
	}
	if ratio(c) < b {
		return gv.readByBackward(c), true
	}
	dist := gv.distances()
	// The knapsack's items are ops (a multi-output op such as attention is
	// one node of the joint graph), with the bytes of their banned outputs.
	type item struct {
		op    int32
		bytes int64
		flops float64
		first int // its first output, for the graph order of ties
	}
	var items []item
	at := map[int32]int{}
	for k := range gv.vals {
		if !ban[k] || gv.input[k] || dist[k] >= 1_000_000_000 || gv.producer(k).Keep {
			continue
		}
		j := gv.p.Values[gv.vals[k]].Producer
		if _, ok := at[j]; !ok {
			at[j] = len(items)
			items = append(items, item{op: j, flops: gv.countedFlops(k), first: k})
		}
		items[at[j]].bytes += gv.p.Values[gv.vals[k]].Bytes
	}
	if len(items) == 0 {
		return gv.readByBackward(c), true
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.bytes, a.bytes) }) // largest first, as Python's sorted
	mem := make([]int, len(items))
	runtime := make([]float32, len(items))
	for i, it := range items {
		mem[i] = int(math.RoundToEven(float64(it.bytes) / float64(hi-lo) * knapsackScale))
		runtime[i] = float32(it.flops)
	}
	keep := knapsack(mem, runtime, int(math.RoundToEven(b*knapsackScale)))
	dontBan := make([]bool, len(gv.vals))
	for i, it := range items {
		if !keep[i] {
			for _, v := range gv.p.Ops[it.op].Out {
				dontBan[gv.idx[v]] = true
			}
		}
	}
	final, _, ok := gv.cut(aggressive, dontBan)
	if !ok {
		return nil, false
	}
	return gv.readByBackward(final), true
}

// knapsackScale quantizes the knapsack's memory (dp_knapsack's S).
const knapsackScale = 10000

// bytesOf is the size of a set of values as the partitioner reckons it: by
// joint-graph node, not by storage. A value its own op saves (its output,
// which the joint graph reads through an alias) and a non-fusible op saves
// too (its input, read through a view) is two nodes, and counts twice: an
// attention output that is also o_proj's input.
func (gv *graphView) bytesOf(set []bool) int64 {
	var n int64
	for k, in := range set {
		if !in {
			continue
		}
		v := gv.vals[k]
		n += gv.p.Values[v].Bytes
		if op := gv.producer(k); op != nil && slices.Contains(op.Saved, v) && gv.savedByOtherNonFusible(k, op) {
			n += gv.p.Values[v].Bytes
		}
	}
	return n
}

// savedByOtherNonFusible reports whether a non-fusible op other than
// value k's producer saves it.
func (gv *graphView) savedByOtherNonFusible(k int, prod *OpInfo) bool {
	v := gv.vals[k]
	for _, j := range gv.users[k] {
		op := &gv.p.Ops[j]
		if op != prod && !fusibleOp(op) && slices.Contains(op.Saved, v) {
			return true
		}
	}
	return false
}

// paramBytes are the graph's parameters as the partitioner sizes them:
// all of them (they are graph inputs, counted in the smallest saved set),
// and those its backward reads as they are (saved in every cut): not a
// weight the graph casts first (autocast), whose cast the backward reads
// instead. With fp32 weights under autocast the inputs can outweigh what
// the partitioner saves, and then no budget changes anything.
func (gv *graphView) paramBytes() (all, read int64) {
	p := gv.p
	seen := map[int32]bool{}
	castOf := map[int32]bool{} // params read through a cast in the graph
	for j := gv.g.First; j < gv.g.End; j++ {
		if op := &p.Ops[j]; op.Kind == "cast" && len(op.In) == 0 {
			for _, pi := range op.Params {
				castOf[pi] = true
			}
		}
	}
	for j := gv.g.First; j < gv.g.End; j++ {
		op := &p.Ops[j]
		for _, pi := range op.Params {
			if t := p.Params[pi].TiedTo; t >= 0 {
				pi = t
			}
			if seen[pi] {
				continue
			}
			seen[pi] = true
			b := gv.paramDT.Bytes(p.Params[pi].Numel)
			all += b
			if !castOf[pi] {
				read += b
			}
		}
	}
	return all, read
}

// countedFlops is value k's op as torch.utils.flop_counter counts it: a
// matmul's 2mnk, an attention kernel's two matmuls over the full score
// matrix (4 b h s_q s_k d: the counter ignores the mask), else 1.
func (gv *graphView) countedFlops(k int) float64 {
	op := gv.producer(k)
	switch op.Kind {
	case "matmul", "grouped_matmul":
		return max(op.Flops, 1)
	case "attention":
		q := gv.p.Values[op.In[0]].Shape
		seq := q[len(q)-2]
		return max(4*float64(Rows(q))*float64(seq)*float64(q[len(q)-1]), 1)
	}
	return 1
}

// knapsack is dp_knapsack: the items (memory in quantized units, runtime)
// to save within capacity so that the saved runtime is largest; float32
// sums and the backtracking of torch/_functorch/_activation_checkpointing/
// knapsack.py, so that ties resolve as PyTorch's do.
func knapsack(mem []int, runtime []float32, capacity int) []bool {
	n := len(mem)
	dp := make([][]float32, n+1)
	dp[0] = make([]float32, capacity+1)
	for i := 1; i <= n; i++ {
		row := append([]float32(nil), dp[i-1]...)
		m, r := mem[i-1], runtime[i-1]
		for j := m; j <= capacity; j++ {
			if m == 0 {
				row[j] = dp[i-1][j] + r
			} else if c := dp[i-1][j-m] + r; c > row[j] {
				row[j] = c
			}
		}
		dp[i] = row
	}
	keep := make([]bool, n)
	j := capacity
	for i := n; i >= 1; i-- {
		if dp[i][j] != dp[i-1][j] {
			keep[i-1] = true
			j -= mem[i-1]
		}
	}
	return keep
}
