package core

import (
	"math"
	"slices"

	"github.com/memsh/memsh/sim/units"
)

// The partition of a compiled graph: what its forward saves for its
// backward, as AOTAutograd's min_cut_rematerialization_partition decides
// it (torch/_functorch/partitioners.py, torch 2.15), modelled as rules on
// the lowered ops:
//
//   - The backward needs what the graph's ops would save in eager mode
//     (their Saved lists: derivatives.yaml).
//   - A value is banned from recomputation when its op is not
//     recomputable (a matmul or attention kernel, a random op, anything
//     off the allowlist), when it is a reduction whose output is under a
//     quarter of its inputs (norm statistics), when a non-fusible op's
//     backward reads it (a matmul's input, "materialized in backward"),
//     when a checkpoint policy keeps it (MUST_SAVE), and when it is used
//     both before and after the first non-fusible use of its producer's
//     chain ("used far apart").
//   - Everything else is recomputed in the backward for free, fused into
//     its kernels, unless saving it is cheaper: the saved set is a
//     minimum cut of the graph in which each value weighs its bytes,
//     twice that when all its users fuse with it, times 1.1 per step to
//     the backward (the partitioner's get_node_weight).
//   - Ops inside a checkpoint region must be recomputed (PREFER_RECOMPUTE)
//     unless the policy keeps them; a kept value is saved only if the
//     backward reaches it.
//
// Inductor then fuses what the partitioner calls fusible: a value made by
// a fusible op whose users all fuse with it, and which is neither saved
// nor used after the graph, never exists in memory (ValueInfo.Fused), and
// a fused op needs no workspace.

// partitionOptions are the partitioner's ban heuristics.
type partitionOptions struct {
	materializedBackward bool // ban_recompute_materialized_backward
	usedFarApart         bool // ban_recompute_used_far_apart
	notInAllowlist       bool // ban_recompute_not_in_allowlist
	withRegions          bool // honour checkpoint regions (must recompute, keep)
}

var defaultPartition = partitionOptions{materializedBackward: true, usedFarApart: true, notInAllowlist: true, withRegions: true}

// graphView is one compiled graph's ops and values, indexed for the
// partition.
type graphView struct {
	p          *Program
	g          Graph
	vals       []Value         // inputs, then values made in the graph, in op order
	idx        map[Value]int32 // value -> position in vals
	input      []bool          // by position: made outside the graph
	users      [][]int32       // by position: ops of the graph reading it
	outside    []bool          // by position: read after the graph (or the loss, a held value)
	required   []bool          // by position: the backward reads it
	saverNonFu []bool          // by position: saved by a non-fusible op
	paramDT    units.DType     // the dtype the graph reads parameters in
}

func (p *Program) view(g Graph, usedAfter []int32) *graphView {
	gv := &graphView{p: p, g: g, idx: map[Value]int32{}}
	add := func(v Value, in bool) int32 {
		if k, ok := gv.idx[v]; ok {
			return k
		}
		k := int32(len(gv.vals))
		gv.idx[v] = k
		gv.vals = append(gv.vals, v)
		gv.input = append(gv.input, in)
		gv.users = append(gv.users, nil)
		gv.required = append(gv.required, false)
		gv.saverNonFu = append(gv.saverNonFu, false)
		gv.outside = append(gv.outside, false)
		return k
	}
	for j := g.First; j < g.End; j++ {
		op := &p.Ops[j]
		if bookkeeping(op) {
			continue
		}
		for _, v := range op.In {
			pr := p.Values[v].Producer
			k := add(v, pr < g.First || pr >= g.End)
			if !slices.Contains(gv.users[k], j) {
				gv.users[k] = append(gv.users[k], j)
			}
		}
		for _, v := range op.Out {
			add(v, false)
		}
	}
	for j := g.First; j < g.End; j++ {
		op := &p.Ops[j]
		for _, v := range op.Saved {
			k, ok := gv.idx[v]
			if !ok {
				k = add(v, true) // saved but not read (a scalar): an input
			}
			gv.required[k] = true
			if !fusibleOp(op) {
				gv.saverNonFu[k] = true
			}
		}
	}
	for k, v := range gv.vals {
		gv.outside[k] = usedAfter[v] >= g.End || v == p.Loss || slices.Contains(p.Held, v) || slices.Contains(p.HeldBackward, v)
	}
	return gv
}

// bookkeeping ops (keep_alive, release) model Python references; a
// compiled graph has none.
func bookkeeping(op *OpInfo) bool { return op.Kind == "keep_alive" || op.Kind == "release" }

func (gv *graphView) producer(k int) *OpInfo {
	if gv.input[k] {
		return nil
	}
	return &gv.p.Ops[gv.p.Values[gv.vals[k]].Producer]
}

// inRegion reports whether the op computing value k runs under activation
// checkpointing and is recomputed (not kept by the policy).
func (gv *graphView) mustRecompute(k int) bool {
	op := gv.producer(k)
	return op != nil && op.Region != 0 && !op.Keep && !gv.p.Regions[op.Region-1].NoGrad
}

// materialized is the partitioner's is_materialized: an input, or a value
// some user cannot fuse with (a user after the graph included).
func (gv *graphView) materialized(k int) bool {
	if gv.input[k] || gv.outside[k] {
		return true
	}
	prod := gv.producer(k)
	for _, j := range gv.users[k] {
		if !fusibleInto(prod, &gv.p.Ops[j]) {
			return true
		}
	}
	return false
}

// distances are the partitioner's dist_from_bw: 1 for a value the
// backward reads, else one more than the nearest of its users' outputs;
// "far" when no path reaches the backward.
func (gv *graphView) distances() []int {
	const far = 1_000_000_000
	dist := make([]int, len(gv.vals))
	for k := len(gv.vals) - 1; k >= 0; k-- { // users come after their inputs
		dist[k] = far
		if gv.required[k] {
			dist[k] = 1
			continue
		}
		for _, j := range gv.users[k] {
			for _, u := range gv.p.Ops[j].Out {
				if d := dist[gv.idx[u]]; d < far {
					dist[k] = min(dist[k], d+1)
				}
			}
		}
	}
	return dist
}

// banned lists the values the partitioner will not recompute, with the
// options' heuristics.
func (gv *graphView) banned(o partitionOptions) []bool {
	ban := make([]bool, len(gv.vals))
	for k, v := range gv.vals {
		op := gv.producer(k)
		switch {
		case op == nil:
			ban[k] = true // a graph input (primal)
		case o.withRegions && op.Keep:
			ban[k] = true // MUST_SAVE
		case o.notInAllowlist && !recomputable(op):
			ban[k] = true // matmuls, attention, random ops, anything off the allowlist
		case randomKinds[op.Kind] || computeIntensiveKinds[op.Kind] || customKinds[op.Kind] || gv.collective(k):
			ban[k] = true // what stays banned without the allowlist
		case o.materializedBackward && gv.saverNonFu[k]:
			ban[k] = true
		case 4*gv.p.Values[v].Bytes < gv.inputBytes(op):
			ban[k] = true // a reduction
		}
	}
	if o.usedFarApart {
		gv.banUsedFarApart(ban)
	}
	return ban
}

func (gv *graphView) inputBytes(op *OpInfo) int64 {
	var n int64
	for _, v := range op.In {
		n += gv.p.Values[v].Bytes
	}
	return n
}

// banUsedFarApart: a value made by a fusible op and read both by a chain
// that reaches a non-fusible op and, later than that op, by a fusible user
// bans that user from recomputation (the partitioner's
// ban_recompute_used_far_apart: the two uses would not fuse).
func (gv *graphView) banUsedFarApart(ban []bool) {
	for k := range gv.vals {
		prod := gv.producer(k)
		if prod == nil || len(gv.users[k]) < 2 {
			continue
		}
		last := slices.Max(gv.users[k])
		first := gv.firstUnfusible(k, last)
		for _, j := range gv.users[k] {
			if j > first && fusibleInto(prod, &gv.p.Ops[j]) {
				for _, u := range gv.p.Ops[j].Out {
					ban[gv.idx[u]] = true
				}
			}
		}
	}
}

// firstUnfusible walks the fusible chains from value k's users, in op
// order up to limit, and returns the first op reached through an edge that
// does not fuse (limit when there is none).
func (gv *graphView) firstUnfusible(k int, limit int32) int32 {
	seen := map[int32]bool{}
	frontier := append([]int32(nil), gv.users[k]...)
	for len(frontier) > 0 {
		slices.Sort(frontier)
		j := frontier[0]
		frontier = frontier[1:]
		if seen[j] {
			continue
		}
		seen[j] = true
		op := &gv.p.Ops[j]
		for _, u := range op.Out {
			for _, next := range gv.users[gv.idx[u]] {
				if next > limit || seen[next] {
					continue
				}
				if !fusibleInto(op, &gv.p.Ops[next]) {
					return next
				}
				frontier = append(frontier, next)
			}
		}
	}
	return limit
}

// minCut returns the values the forward saves (by position), after the
// partitioner's cut and the extraction of the backward, which drops saved
// values the backward never reads. ok is false when no finite cut exists.
func (gv *graphView) minCut(o partitionOptions) (saved []bool, ok bool) {
	cut, _, ok := gv.cut(o, nil)
	if !ok {
		return nil, false
	}
	return gv.readByBackward(cut), true
}

// cut is the partitioner's solve_min_cut: the values on the cut (by
// position) and the values it banned from recomputation; dontBan (by
// position, may be nil) are values the memory budget lets it recompute.
func (gv *graphView) cut(o partitionOptions, dontBan []bool) (cut, ban []bool, ok bool) {
	n := len(gv.vals)
	src, snk := int32(2*n), int32(2*n+1)
	in := func(k int) int32 { return int32(2 * k) }
	out := func(k int) int32 { return int32(2*k + 1) }
	net := newFlowNet(2*n + 2)
	inf := math.Inf(1)
	ban = gv.banned(o)
	for k := range ban {
		if dontBan != nil && dontBan[k] && !gv.collective(k) {
			ban[k] = false // collectives stay banned whatever the budget
		}
	}
	dist := gv.distances()
	for k, v := range gv.vals {
		if gv.required[k] {
			net.edge(out(k), snk, inf)
		}
		if o.withRegions && gv.mustRecompute(k) {
			net.edge(in(k), snk, inf)
			continue
		}
		if ban[k] {
			net.edge(src, in(k), inf)
		}
		w := float64(gv.p.Values[v].Bytes) * math.Pow(1.1, float64(max(min(dist[k], 100), 1)))
		if !gv.materialized(k) {
			w *= 2
		}
		net.edge(in(k), out(k), w)
		for _, j := range gv.users[k] {
			for _, u := range gv.p.Ops[j].Out {
				net.edge(out(k), in(int(gv.idx[u])), inf)
			}
		}
	}
	side, ok := net.minCut(src, snk)
	if !ok {
		return nil, nil, false
	}
	cut = make([]bool, n)
	for k := range cut {
		cut[k] = side[in(k)] && !side[out(k)]
	}
	return cut, ban, true
}

// collective reports whether value k is made by a collective.
func (gv *graphView) collective(k int) bool {
	op := gv.producer(k)
	if op == nil {
		return false
	}
	switch op.Kind {
	case "all_gather", "reduce_scatter", "all_to_all", "all_reduce":
		return true
	}
	return false
}

// readByBackward keeps the cut values the backward reads: a required value,
// or one a required value is recomputed from without passing another saved
// value.
func (gv *graphView) readByBackward(cut []bool) []bool {
	used := make([]bool, len(cut))
	seen := make([]bool, len(cut))
	var walk func(k int)
	walk = func(k int) {
		if seen[k] {
			return
		}
		seen[k] = true
		if cut[k] {
			used[k] = true
			return
		}
		if op := gv.producer(k); op != nil {
			for _, v := range op.In {
				walk(int(gv.idx[v]))
			}
		}
	}
	for k := range gv.vals {
		if gv.required[k] {
			walk(k)
		}
	}
	return used
}

// partitionGraphs applies the partition to every compiled graph of the
// program: the saved sets, what a policy still keeps, the values that
// never exist, and the fused ops' traffic.
func (b *Builder) partitionGraphs() {
	p := b.P
	if len(p.Graphs) == 0 {
		return
	}
	for _, g := range p.Graphs {
		p.mergeCasts(g)
	}
	usedAfter := make([]int32, len(p.Values))
	for i := range usedAfter {
		usedAfter[i] = -1
	}
	for j := range p.Ops {
		for _, v := range p.Ops[j].In {
			usedAfter[v] = int32(j)
		}
	}
	for _, g := range p.Graphs {
		gv := p.view(g, usedAfter)
		gv.paramDT = b.Prec.Params
		plain := defaultPartition
		plain.withRegions = false
		saved, ok := gv.minCut(plain)
		if !ok {
			continue // no finite cut: the graph stays as eager mode runs it
		}
		if f, ok := b.Ckpt.compileBudget(); ok && f < 1 {
			if kept, ok := gv.budgetCut(f); ok && !slices.Equal(kept, saved) {
				gv.recomputeBeyond(kept)
			}
		} else if gv.hasRegion() {
			if kept, ok := gv.minCut(defaultPartition); ok {
				gv.dropUnreadKept(kept)
			}
		}
		gv.rewriteSaved(saved)
		gv.fuse(saved)
		gv.saveSoftmaxStats(saved)
		gv.weightGradFirst()
		gv.gradInPlace()
	}
}

// saveSoftmaxStats: a softmax (or cross-entropy's log_softmax) that the
// backward recomputes is decomposed into a row max, a row sum of
// exponentials and pointwise ops; the two reductions are banned from
// recomputation, so the forward writes and saves them (fp32, one per row).
func (gv *graphView) saveSoftmaxStats(saved []bool) {
	p := gv.p
	for j := gv.g.First; j < gv.g.End; j++ {
		op := &p.Ops[j]
		if op.Kind != "softmax" && op.Kind != "cross_entropy" {
			continue
		}
		recomputed := false
		for _, v := range op.Out {
			if k, ok := gv.idx[v]; ok && gv.required[k] && !saved[k] {
				recomputed = true
			}
		}
		if !recomputed || len(op.Out) == 0 {
			continue
		}
		rows := Rows(p.Values[op.Out[0]].Shape)
		for _, name := range []string{"amax", "sumexp"} {
			p.Values = append(p.Values, ValueInfo{
				Name: op.Name + "." + name, Shape: []int64{rows, 1}, Dtype: units.FP32, Bytes: units.FP32.Bytes(rows),
				Cat: CatActivations, Producer: j, Why: "softmax row " + name + " saved by the compiled graph (the backward recomputes the softmax)",
			})
			v := Value(len(p.Values) - 1)
			op.Out = append(op.Out, v)
			op.Saved = append(op.Saved, v)
		}
	}
}

// recomputeBeyond runs a graph under a memory budget as a checkpoint
// region whose kept values are the budget's saved set: the forward holds
// them and the graph's inputs, and the backward recomputes the rest,
// materializing what the unbudgeted partition would have saved (the
// values its backward kernels read) while the graph's backward runs. An
// op is kept whole: one that makes several values, some of them saved,
// holds them all.
func (gv *graphView) recomputeBeyond(kept []bool) {
	p := gv.p
	p.Regions = append(p.Regions, Region{name: gv.g.Name, First: gv.g.First, End: gv.g.End})
	id := int32(len(p.Regions))
	for j := gv.g.First; j < gv.g.End; j++ {
		op := &p.Ops[j]
		op.Region = id
		for _, v := range op.Out {
			if k, ok := gv.idx[v]; ok && kept[k] {
				op.Keep = true
			}
		}
	}
}

func (gv *graphView) hasRegion() bool {
	for j := gv.g.First; j < gv.g.End; j++ {
		if gv.p.Ops[j].Region != 0 {
			return true
		}
	}
	return false
}

// dropUnreadKept: under compile a checkpoint policy's kept output is saved
// only when the backward reads it (torchtitan's per-op policy inside a
// compiled block keeps down_proj's output in eager mode, not compiled).
func (gv *graphView) dropUnreadKept(saved []bool) {
	for j := gv.g.First; j < gv.g.End; j++ {
		op := &gv.p.Ops[j]
		if !op.Keep {
			continue
		}
		read := false
		for _, v := range op.Out {
			read = read || saved[gv.idx[v]]
		}
		op.Keep = read
	}
}

// rewriteSaved hands each saved value to the op whose backward reads it
// last (the first in the forward among its readers and savers); the
// graph's other ops save nothing. A region's inputs are held by the region.
func (gv *graphView) rewriteSaved(saved []bool) {
	p := gv.p
	release := make([]int32, len(gv.vals))
	for k := range release {
		release[k] = -1
		if len(gv.users[k]) > 0 {
			release[k] = slices.Min(gv.users[k])
		}
	}
	for j := gv.g.First; j < gv.g.End; j++ {
		for _, v := range p.Ops[j].Saved {
			if k := gv.idx[v]; release[k] < 0 || j < release[k] {
				release[k] = j
			}
		}
		p.Ops[j].Saved = nil
	}
	for k, v := range gv.vals {
		if !saved[k] || release[k] < 0 {
			continue
		}
		op := &p.Ops[release[k]]
		if gv.input[k] && op.Region != 0 {
			continue // the checkpoint region holds its inputs
		}
		op.Saved = append(op.Saved, v)
	}
}

// fuse marks the values Inductor never materializes and drops the fused
// ops' workspaces. (Their traffic is the time model's: a compiled plan
// runs with dispatch "compiled", which prices each elementwise chain as one
// kernel.)
func (gv *graphView) fuse(saved []bool) {
	p := gv.p
	for k, v := range gv.vals {
		vi := &p.Values[v]
		if gv.input[k] {
			continue
		}
		vi.Cached = false // autocast's weight cache does not outlive a compiled graph's forward
		prod := gv.producer(k)
		// A value a checkpoint policy keeps (and the backward reads:
		// dropUnreadKept) is written by the forward, fusible or not.
		if !saved[k] && fusibleOp(prod) && !prod.Keep && !gv.materialized(k) {
			vi.Fused = true
		}
	}
	for j := gv.g.First; j < gv.g.End; j++ {
		if op := &p.Ops[j]; fusibleOp(op) {
			op.WorkF, op.WorkB = 0, 0 // a fused kernel keeps its temporaries in registers
		}
	}
}

// mergeCasts is the common-subexpression elimination AOTAutograd runs on a
// graph before partitioning it (functorch config.cse): autocast casts the
// same activation once per linear that reads it (q, k and v projections
// each cast the norm's output), a compiled graph once. Readers of a
// repeated cast read the first; the repeat is left without readers.
func (p *Program) mergeCasts(g Graph) {
	type key struct {
		in Value
		dt units.DType
	}
	first := map[key]Value{}
	alias := map[Value]Value{}
	for j := g.First; j < g.End; j++ {
		op := &p.Ops[j]
		for i, v := range op.In {
			if a, ok := alias[v]; ok {
				op.In[i] = a
			}
		}
		for i, v := range op.Saved {
			if a, ok := alias[v]; ok {
				op.Saved[i] = a
			}
		}
		if op.Kind != "cast" || len(op.In) != 1 || len(op.Out) != 1 {
			continue
		}
		k := key{op.In[0], p.Values[op.Out[0]].Dtype}
		if v, ok := first[k]; ok {
			alias[op.Out[0]] = v
			op.In, op.Flops = nil, 0 // dead: its output has no readers and is never made
			continue
		}
		first[k] = op.Out[0]
	}
	if len(alias) == 0 {
		return
	}
	for j := g.End; j < int32(len(p.Ops)); j++ { // readers after the graph
		for i, v := range p.Ops[j].In {
			if a, ok := alias[v]; ok {
				p.Ops[j].In[i] = a
			}
		}
	}
}
