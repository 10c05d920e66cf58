package core

import (
	"reflect"
	"slices"
)

// Blocks copied from another lowering. Each of the search's block
// profiles lowers one plan at several layouts (sim/search's
// search_profile_lower.go: a model of one block and of two, and
// pipeline stages of one block and of two), and every one of these
// programs lowered its first block from scratch: 18,700 block lowerings
// in BenchmarkSearchLlama70B1024, where its 2,608 profiles have 8 each.
// A block whose lowering reads only its layer, the lowering's
// configuration (lowerConf), its input's look and the checkpoint policy
// it runs under, and whose lowering appended entries that refer to
// nothing of the program outside them but its input (selfContained),
// lowers into the same ops, values, parameters, regions, graphs,
// collectives and buffers in any program whose lowering has that
// configuration: a copy of them, renamed and shifted as cloneBlock
// copies a block within a program (block_clone.go), is that lowering.
// A lowering into buffers with Templates keeps such a block, its
// entries in lists of its own, and copies it where a later lowering
// into buffers sharing the Templates would lower a block from scratch
// with all of these equal. The copy leaves the builder's maps as a
// copy within a program does (no ModuleName, Megatron's fused inputs
// unrecorded: they hold the copied block's values, which no layer
// after it reads); a block whose lowering changed anything else of the
// builder or of the program outside its ranges is not kept
// (sideCounts).
//
// TestBlockTemplatesLowerAsFromScratch (sim/search) lowers every
// profile of the 70B search's space and of an MoE space with and
// without templates and compares the programs entry by entry.

// BlockTemplates are the blocks kept for later lowerings (a
// ProgramBuffers' Templates): the owner's, used by one goroutine at a
// time, never a package's. A lowering's configuration is compared
// whole, so templates may serve any plan; Reset drops them where the
// owner moves on to lowerings that will not match (a search's next
// profile), so that a lookup reads a few.
type BlockTemplates struct {
	list   []*blockTemplate
	copies int
	// spare are the templates Reset dropped, whose lists the next ones
	// are written into: nothing a copy made reads them (cloneBlock
	// copies a template's entries into the program's own lists, and
	// shares only its names and shapes, which no template writes). Each
	// template in lists of its own was a third more of
	// BenchmarkSearchLlama70B1024's bytes.
	spare []*blockTemplate
	// conf and policy are a lookup's (template), sides the builder as
	// each block being lowered began (a block may lower another inside
	// it; block_sides.go).
	conf   lowerConf
	policy Checkpoint
	sides  []sides
}

// Copies is how many blocks lowerings copied from t's templates.
func (t *BlockTemplates) Copies() int { return t.copies }

// Reset drops the templates.
func (t *BlockTemplates) Reset() {
	t.spare = append(t.spare, t.list...)
	clear(t.list)
	t.list, t.sides = t.list[:0], t.sides[:0]
}

// push records b's sides as a block begins to lower from scratch.
func (t *BlockTemplates) push(b *Builder) {
	t.sides = append(t.sides, sides{})
	t.sides[len(t.sides)-1].of(b)
}

// pop returns the sides push recorded last, until the next push.
func (t *BlockTemplates) pop() *sides {
	n := len(t.sides) - 1
	t.sides = t.sides[:n]
	return &t.sides[:n+1][n]
}

// blockTemplate is a block kept with what its lowering read.
type blockTemplate struct {
	src         blockCopy // in lists of its own (src.prog: lists.prog)
	lists       templateLists
	conf        lowerConf
	policy      Checkpoint // the policy the block ran under (Checkpoint.BlockPolicy, as enterBlock sets it)
	checkpoint  bool       // the block ran in a checkpoint region of its own (OpenBlock)
	staged      bool       // lowered in a pipeline stage's program
	positionIDs bool       // handed the model's position_ids (lowerBlock)
}

// maxBlockTemplates bounds the templates kept (a lookup reads them
// all): a profile's lowerings keep one or two.
const maxBlockTemplates = 8

// lowerConf is the Builder's configuration: what lowerProgram,
// configureLowering and configureFinetune set before the model's
// layers lower, which no layer changes for good, and none of the
// lowering's progress (the program, the module path, the open region
// and graph, the block index, the maps and lists it fills). Its fields
// that hold no pointer, slice or map are in flat, whose == is
// reflect.DeepEqual's verdict (same): template compares them as one
// block of memory, where reflect.DeepEqual of the whole configuration
// read its ~200 fields one reflected value at a time (4 % of
// BenchmarkSearchLlama70B1024's time in session 42's profile).
type lowerConf struct {
	flat      lowerFlat
	ckpt      Checkpoint
	lora      *LoRA
	pref      *Preference
	ft        Finetune // the builder's, when it has one (flat.hasFt)
	cross     *CrossStates
	deepstack *DeepstackStates
}

// lowerFlat is the part of lowerConf without pointers, slices, maps,
// interfaces or funcs, at any depth (TestLowerFlatHoldsNoReference): two
// values are == exactly when reflect.DeepEqual says they are equal
// (it compares such fields with ==, field by field).
type lowerFlat struct {
	batch, seq         int64
	prec               Precision
	rt                 Runtime
	f8                 Float8
	qat                QAT
	quant              int
	eval               bool
	compile            Compile
	members            int64
	sequential, spread bool
	rollout            int64
	inputGrad          bool
	refCopy, reuse     bool
	reuseStrip         string
	noGradTrain        int
	tiedHead           int32
	everyBlock         bool
	par                parLowering
	hasFt              bool
	images             Images
	videos             Videos
}

// conf is b's lowerConf.
func (b *Builder) conf() lowerConf {
	c := lowerConf{flat: lowerFlat{batch: b.Batch, seq: b.Seq, prec: b.Prec, rt: b.Rt, f8: b.f8, qat: b.qat,
		quant: int(b.quant), eval: b.Eval, compile: b.compile, members: b.members, sequential: b.sequential, spread: b.spread,
		rollout: b.rollout, inputGrad: b.inputGrad, refCopy: b.refCopy, reuse: b.reuse, reuseStrip: b.reuseStrip,
		noGradTrain: b.noGradTrain, tiedHead: b.tiedHead, everyBlock: b.everyBlock, par: b.Par, images: b.Images, videos: b.Videos},
		ckpt: b.Ckpt, lora: b.Lora, pref: b.pref, cross: b.Cross, deepstack: b.Deepstack}
	if b.Ft != nil {
		c.ft, c.flat.hasFt = *b.Ft, true
	}
	return c
}

// same says whether c and d, made by conf, are equal as
// reflect.DeepEqual(c, d) says: flat by ==, the rest field by field by
// reflect.DeepEqual (a struct is deeply equal when each of its fields
// is; equal pointers point to equal values). Where neither has a
// Finetune (flat.hasFt, equal in both once flat is) conf left both fts
// zero, equal.
func (c *lowerConf) same(d *lowerConf) bool {
	return c.flat == d.flat && sameCheckpoint(&c.ckpt, &d.ckpt) &&
		(c.lora == d.lora || reflect.DeepEqual(c.lora, d.lora)) &&
		(c.pref == d.pref || reflect.DeepEqual(c.pref, d.pref)) &&
		(!c.flat.hasFt || reflect.DeepEqual(&c.ft, &d.ft)) &&
		(c.cross == d.cross || reflect.DeepEqual(c.cross, d.cross)) &&
		(c.deepstack == d.deepstack || reflect.DeepEqual(c.deepstack, d.deepstack))
}

// sameCheckpoint says whether a and b are equal as reflect.DeepEqual
// says: each field by ==, a slice (nil, or not) by its elements
// (TestSameCheckpointAsDeepEqual changes each field in turn).
func sameCheckpoint(a, b *Checkpoint) bool {
	if a.Mode != b.Mode || a.Every != b.Every || a.Selective != b.Selective || a.Reentrant != b.Reentrant ||
		a.NoEarlyStop != b.NoEarlyStop || a.InputGrad != b.InputGrad || a.Budget != b.Budget ||
		!sameList(a.Modules, b.Modules) || !sameList(a.Save, b.Save) ||
		(a.Blocks == nil) != (b.Blocks == nil) || len(a.Blocks) != len(b.Blocks) {
		return false
	}
	for i := range a.Blocks {
		if !sameCheckpoint(&a.Blocks[i], &b.Blocks[i]) {
			return false
		}
	}
	return true
}

// template returns the template block b.block may be copied from: one
// of layer l on an input that looks as x, lowered under the same
// configuration (conf), policy and place (no open region; a compiled
// graph open or not alike), and with room for it under the caps.
func (b *Builder) template(l Layer, x Value, positionIDs bool) *blockTemplate {
	if b.templates == nil || b.region != 0 {
		return nil
	}
	conf, policy, known := &b.templates.conf, &b.templates.policy, false
	for _, t := range b.templates.list {
		src := &t.src
		if t.src.layer != l || t.src.graph != b.graph || t.staged != (b.P.Stage != nil) || t.positionIDs != positionIDs ||
			len(b.P.Ops)+src.last.ops-src.first.ops > maxOps ||
			len(b.P.Params)+src.last.params-src.first.params > maxParamTensors ||
			!b.looksAs(x, &src.inLook, src.anyInName) {
			continue
		}
		if !known {
			*conf, *policy, known = b.conf(), b.Ckpt.BlockPolicy(b.block), true // as enterBlock sets it
		}
		if policy.block(b.block) != t.checkpoint || !sameCheckpoint(policy, &t.policy) || !conf.same(&t.conf) {
			continue
		}
		return t
	}
	return nil
}

// keepTemplate keeps block c, just lowered from scratch and copyable, as
// a template when its entries refer to nothing of the program outside
// them but its input (selfContained) and its lowering left the rest of
// the builder and the program as they were (side, as it began): its
// configuration then is the one it was lowered under.
func (b *Builder) keepTemplate(c *blockCopy, side *sides, positionIDs bool) {
	ts := b.templates
	if len(ts.list) >= maxBlockTemplates || !b.selfContained(c) || !side.sameAs(b) {
		return
	}
	t := new(blockTemplate)
	if n := len(ts.spare); n > 0 {
		t = ts.spare[n-1]
		ts.spare = ts.spare[:n-1]
	}
	policy := b.Ckpt.BlockPolicy(c.index)
	*t = blockTemplate{src: *c, lists: t.lists, conf: b.conf(), policy: policy, checkpoint: policy.block(c.index),
		staged: b.P.Stage != nil, positionIDs: positionIDs}
	t.src.room = nil // counted on the template's own lists
	t.src.prog = t.lists.fill(b.P, c.first, c.last)
	ts.list = append(ts.list, t)
}

// selfContained says whether block c's entries (first..last of b.P)
// refer to nothing of the program outside them but its input c.in: a
// value, parameter, op or region of the program before it sits at
// another place in another program.
func (b *Builder) selfContained(c *blockCopy) bool {
	p, f, l := b.P, c.first, c.last
	if c.region != 0 {
		return false
	}
	value := func(v Value) bool { return v == c.in || int(v) >= f.values && int(v) < l.values }
	region := func(id int32) bool { return id == 0 || int(id) > f.regions && int(id) <= l.regions }
	for i := f.ops; i < l.ops; i++ {
		op := &p.Ops[i]
		for _, vs := range [...][]Value{op.In, op.Out, op.Saved} {
			for _, v := range vs {
				if !value(v) {
					return false
				}
			}
		}
		for _, pi := range op.Params {
			if int(pi) < f.params || int(pi) >= l.params {
				return false
			}
		}
		if !region(op.Region) || (op.Block != 0 && op.Block != int32(c.index)+1) {
			return false
		}
	}
	for _, v := range p.Values[f.values:l.values] {
		if v.Producer >= 0 && (int(v.Producer) < f.ops || int(v.Producer) >= l.ops) {
			return false
		}
	}
	for _, pi := range p.Params[f.params:l.params] {
		if pi.TiedTo >= 0 && (int(pi.TiedTo) < f.params || int(pi.TiedTo) >= l.params) {
			return false
		}
	}
	for _, r := range p.Regions[f.regions:l.regions] {
		if !region(r.Parent) || int(r.First) < f.ops || int(r.End) > l.ops {
			return false
		}
	}
	for _, g := range p.Graphs[f.graphs:l.graphs] {
		if int(g.First) < f.ops || int(g.End) > l.ops {
			return false
		}
	}
	for _, cr := range p.Comm[f.comm:l.comm] {
		if cr.Beside > 0 && (int(cr.Beside) <= f.ops || int(cr.Beside) > l.ops) {
			return false
		}
	}
	return true
}

// templateLists are a template's own lists: a program whose lists hold
// another's entries first..last at their places, and the value and
// parameter lists of its ops.
type templateLists struct {
	prog   Program
	vals   []Value
	params []int32
}

// fill writes p's entries first..last into q's lists (p's lists, and the
// arena's value and parameter lists its ops hold, are written again by
// the next lowering into the same buffers) and returns their program.
// Names and shapes are shared: nothing writes them once made. The
// entries before first are left as they were: nothing reads them.
func (q *templateLists) fill(p *Program, f, l progCounts) *Program {
	nv, np := 0, 0
	for _, op := range p.Ops[f.ops:l.ops] {
		nv += len(op.In) + len(op.Out) + len(op.Saved)
		np += len(op.Params)
	}
	vals, params := slices.Grow(q.vals[:0], nv), slices.Grow(q.params[:0], np)
	own := func(vs []Value) []Value {
		if vs == nil {
			return nil
		}
		i := len(vals)
		vals = append(vals, vs...)
		return vals[i:len(vals):len(vals)]
	}
	r := &q.prog
	r.Ops = atLength(r.Ops, l.ops)
	for i := f.ops; i < l.ops; i++ {
		op := p.Ops[i]
		op.In, op.Out, op.Saved = own(op.In), own(op.Out), own(op.Saved)
		if op.Params != nil {
			k := len(params)
			params = append(params, op.Params...)
			op.Params = params[k:len(params):len(params)]
		}
		r.Ops[i] = op
	}
	q.vals, q.params = vals, params
	r.Values, r.Params, r.Regions = atLength(r.Values, l.values), atLength(r.Params, l.params), atLength(r.Regions, l.regions)
	r.Graphs, r.Comm, r.Buffers = atLength(r.Graphs, l.graphs), atLength(r.Comm, l.comm), atLength(r.Buffers, l.buffers)
	copy(r.Values[f.values:], p.Values[f.values:l.values])
	copy(r.Params[f.params:], p.Params[f.params:l.params])
	copy(r.Regions[f.regions:], p.Regions[f.regions:l.regions])
	copy(r.Graphs[f.graphs:], p.Graphs[f.graphs:l.graphs])
	copy(r.Comm[f.comm:], p.Comm[f.comm:l.comm])
	copy(r.Buffers[f.buffers:], p.Buffers[f.buffers:l.buffers])
	return r
}

// atLength is s at length n, its array reused when it has room.
func atLength[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
