package core

import (
	"reflect"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Repeated blocks are lowered once and copied. Lowering a block is a pure
// function of the layer, what the block's input looks like (ValueInfo but
// its place, its module path and why it exists; its name too where no
// LastName of the block read it), the checkpoint policy the
// block runs under and the builder's open region and compiled graph: the
// module path only names what it appends. So when block t would lower
// with all of these equal to an earlier block s, its ops, values,
// parameters, regions, graphs, collectives and buffers are s's, renamed
// from s's module path to t's, with every index into s's own entries
// shifted by where t's begin and s's input replaced by t's. Block 79 of
// Llama-3-70B costs a copy instead of a lowering, as does every in-flight
// micro-batch copy of a pipeline stage after the first.
//
// A block is copied only when that argument holds as the code stands:
//   - nothing of the lowering depends on a name: no LoRA (targets by
//     name), no freezing and no quantization (patterns over names);
//   - the source appended nothing the program keeps outside its ranges
//     (held values, tables, an autocast head cast, a new batch, labels or
//     loss, a value Share leaves for later layers), opened no nested
//     repeated block, changed nothing it did not
//     append (its input's ValueInfo), and named everything under its
//     module path;
//   - the copy stays within the program's caps (maxOps, maxParamTensors);
//     else the block is lowered, and stops with the caps' error where it
//     would have.
//
// Plan.EveryBlock lowers every block instead: the reference the tests
// compare the copies with, program by program and report by report
// (block_clone_test.go, sim/block_clone_test.go).

// blockCopy is a repeated block as its lowering appended it.
type blockCopy struct {
	layer   Layer
	prefix  string // its module path
	index   int    // Builder.block it was lowered as
	region  int32  // the builder's open region when it began
	graph   bool   // a compiled graph was open when it began
	in, out Value
	inLook  ValueInfo
	// anyInName: no LastName read the input's name while the block
	// lowered, so a copy may take an input whose look differs in its
	// name alone (block 1 of a stage, whose input is block 0's output
	// where block 0's is the received activation or the embedding's).
	anyInName   bool
	first, last progCounts
	room        *cloneRoom // what a copy takes of the arena, counted at the first copy
	// prog is the program whose lists hold the block at first..last: a
	// template's own lists (block_templates.go); nil, the program being
	// lowered.
	prog *Program
}

// cloneRoom is what each copy of a block takes of the clone arena: bytes
// of names and renamed whys (less the renames' growth), and how often the
// block's path appears in its whys; entries of
// value and parameter lists. The same for every copy, so counted once (a
// count at every copy read each op of the block again: a fifth of a
// 65,536-block lowering's memory reads).
type cloneRoom struct {
	names, whyPaths, renames, vals, params int
	// The whys of the block's values and buffers cut at each mention of
	// the block's path (nil: no mention), so that a copy joins the
	// pieces with its own path instead of searching each why again.
	valueWhys, bufferWhys [][]string
	// template is the name table's entry for the block's names (nil: no
	// table, or a full one), found at the first copy (cloneNames).
	template *nameTemplate
}

// roomOf counts src's cloneRoom.
func (b *Builder) roomOf(src *blockCopy) *cloneRoom {
	if src.room != nil {
		return src.room
	}
	p, f, l := b.source(src), src.first, src.last
	c := &cloneRoom{valueWhys: make([][]string, l.values-f.values), bufferWhys: make([][]string, l.buffers-f.buffers)}
	why := func(s string) []string { // renameWhy writes s renamed, when it names the path
		n := strings.Count(s, src.prefix)
		if n == 0 {
			return nil
		}
		c.names, c.whyPaths = c.names+len(s), c.whyPaths+n
		return strings.Split(s, src.prefix) // the mentions a copy renames (copyable checked each is a whole path: renames)
	}
	for i := f.ops; i < l.ops; i++ {
		op := &p.Ops[i]
		c.names += len(op.Name) + len(op.Module)
		c.vals += len(op.In) + len(op.Out) + len(op.Saved)
		c.params += len(op.Params)
	}
	for i := f.values; i < l.values; i++ {
		v := &p.Values[i]
		c.names += len(v.Name)
		c.valueWhys[i-f.values] = why(v.Why)
	}
	for i := f.params; i < l.params; i++ {
		c.names += len(p.Params[i].Name)
	}
	for _, r := range p.Regions[f.regions:l.regions] {
		c.names += len(r.name)
	}
	for _, g := range p.Graphs[f.graphs:l.graphs] {
		c.names += len(g.Name)
	}
	for i, bu := range p.Buffers[f.buffers:l.buffers] {
		c.names += len(bu.Name)
		c.bufferWhys[i] = why(bu.Why)
	}
	c.renames = (l.ops-f.ops)*2 + l.values - f.values + l.params - f.params + l.regions - f.regions + l.graphs - f.graphs + l.buffers - f.buffers
	src.room = c
	return c
}

// source is the program whose lists hold src's block.
func (b *Builder) source(src *blockCopy) *Program {
	if src.prog != nil {
		return src.prog
	}
	return b.P
}

// progCounts is where the program's lists (and the builder's state a
// block must not touch) stood at a moment of the lowering.
type progCounts struct {
	ops, values, params, regions, graphs, comm, buffers int
	held, tables, heads, outputs, unfreeze, shares      int
	input, labels, loss                                 Value
}

func (b *Builder) counts() progCounts {
	p := b.P
	c := progCounts{ops: len(p.Ops), values: len(p.Values), params: len(p.Params), regions: len(p.Regions),
		graphs: len(p.Graphs), comm: len(p.Comm), buffers: len(p.Buffers), held: len(p.Held) + len(p.HeldForward) + len(p.HeldBackward),
		tables: len(p.Tables), heads: len(b.headCast), shares: b.shares, input: p.Input, labels: p.Labels, loss: p.Loss}
	if p.Stage != nil {
		c.outputs = len(p.Stage.Outputs)
	}
	if b.Ft != nil {
		c.unfreeze = b.Ft.Unfreeze
	}
	return c
}

// look is what lowering may read of a block's input: its ValueInfo but
// its place (the producer's index), its module path (Cast reads the last
// part of its name) and why it exists (which no lowering reads; it names
// the module that made it: "output of linear layers.4.linear").
func (b *Builder) look(x Value) ValueInfo {
	v := b.P.Values[x]
	v.Name = b.LastName(x)
	v.Producer = min(v.Producer, 0)
	v.Why = ""
	return v
}

// blockCopies are the blocks lowered so far that may be copied, the
// latest first, at most maxBlockCopies (a stage's first block takes a
// received activation, the next ones a block's output; hybrid stacks
// alternate layers).
type blockCopies []*blockCopy

const maxBlockCopies = 4

// keepingBuffers is s without the blocks whose buffers lie past n, the
// length the program's buffer list was cut back to (a pipeline stage's
// micro-batch copies register a module's buffers once: lowerStage), so
// that no later copy reads a buffer that is gone (a router's
// e_score_correction_bias recorded in a stage's second micro-batch
// copied into its third indexed past the list: an internal error on
// MiniCPM5-MoE, Hy3, LongCat-Flash, Solar Open and LFM2-MoE at pp=4).
// A block without buffers stays; s itself when every block stays (most
// stacks register no buffer: no list made a micro-batch).
func (s blockCopies) keepingBuffers(n int) blockCopies {
	keeps := func(c *blockCopy) bool { return c.first.buffers == c.last.buffers || c.last.buffers <= n }
	for i, c := range s {
		if keeps(c) {
			continue
		}
		out := append(make(blockCopies, 0, len(s)), s[:i]...)
		for _, c := range s[i+1:] {
			if keeps(c) {
				out = append(out, c)
			}
		}
		return out
	}
	return s
}

// lowerBlock lowers layer l as repeated block b.block, under the module
// path the caller opened, or copies one of srcs when l would lower here
// exactly as it did. It returns the block's output and the blocks to copy
// from next. positionIDs hands the block the base model's position_ids
// (Model.PositionIDs).
func (b *Builder) lowerBlock(l Layer, x Value, srcs blockCopies, positionIDs bool) (Value, blockCopies) {
	b.checkStop()
	for _, src := range srcs {
		if b.sameLowering(src, l, x) {
			return b.cloneBlock(src, x), srcs
		}
	}
	if b.templates != nil {
		if t := b.template(l, x, positionIDs); t != nil {
			b.templates.copies++
			return b.cloneBlock(&t.src, x), srcs
		}
		b.templates.push(b) // as it begins: keepTemplate compares
	}
	c := &blockCopy{layer: l, prefix: b.prefix, index: b.block, region: b.region, graph: b.graph,
		in: x, inLook: b.look(x), first: b.counts()}
	outer := b.inName
	b.inName = nameWatch{of: x}
	closeBlock := b.OpenBlock() // its policy, checkpoint region and compiled graph
	if positionIDs {
		b.handPositionIDs()
	}
	c.out = b.LowerChild(l, x)
	closeBlock()
	c.last = b.counts()
	c.anyInName = !b.inName.read
	var side *sides
	if b.templates != nil {
		side = b.templates.pop()
	}
	// A block inside a block: the outer one counts as having read its
	// input's name (it is not copied anyway: copyable).
	b.inName = nameWatch{of: outer.of, read: true}
	if !b.copyable(c) {
		return c.out, srcs
	}
	if b.templates != nil { // none matched it (above)
		b.keepTemplate(c, side, positionIDs)
	}
	return c.out, append(blockCopies{c}, srcs[:min(len(srcs), maxBlockCopies-1)]...)
}

// copyable says whether block c, just lowered, may be copied.
func (b *Builder) copyable(c *blockCopy) bool {
	f, l := c.first, c.last
	if b.everyBlock || b.Lora != nil || (b.Ft != nil && (len(b.Ft.freeze) > 0 || len(b.Ft.trainable) > 0 || b.Ft.quant != "")) ||
		b.block != c.index+1 || l.held != f.held || l.tables != f.tables || l.heads != f.heads ||
		l.outputs != f.outputs || l.unfreeze != f.unfreeze || l.shares != f.shares ||
		l.input != f.input || l.labels != f.labels || l.loss != f.loss ||
		!b.looksAs(c.in, &c.inLook, false) {
		return false
	}
	under := func(name string) bool {
		return strings.HasPrefix(name, c.prefix) && (len(name) == len(c.prefix) || name[len(c.prefix)] == '.')
	}
	p := b.P
	for _, op := range p.Ops[f.ops:l.ops] {
		if !under(op.Name) || !under(op.Module) {
			return false
		}
	}
	for _, v := range p.Values[f.values:l.values] {
		if !renames(v.Why, c.prefix) || !under(v.Name) {
			return false
		}
	}
	for _, pi := range p.Params[f.params:l.params] {
		if !under(pi.Name) {
			return false
		}
	}
	for _, r := range p.Regions[f.regions:l.regions] {
		if !under(r.name) {
			return false
		}
	}
	for _, g := range p.Graphs[f.graphs:l.graphs] {
		if !under(g.Name) {
			return false
		}
	}
	for _, bu := range p.Buffers[f.buffers:l.buffers] {
		if !renames(bu.Why, c.prefix) || !under(bu.Name) {
			return false
		}
	}
	return true
}

// sameLowering says whether lowering l on x as block b.block here would
// append what src appended, renamed: the same layer, an input that looks
// the same, the same policy and region choice for the block, the same
// open region and graph, and room for the copy under the caps.
func (b *Builder) sameLowering(src *blockCopy, l Layer, x Value) bool {
	if l != src.layer || b.region != src.region || b.graph != src.graph ||
		len(b.P.Ops)+src.last.ops-src.first.ops > maxOps ||
		len(b.P.Params)+src.last.params-src.first.params > maxParamTensors {
		return false
	}
	here, there := b.Ckpt, b.Ckpt
	if b.Ckpt.Mode == "blocks" { // else every block runs under b.Ckpt itself
		here, there = b.Ckpt.BlockPolicy(b.block), b.Ckpt.BlockPolicy(src.index)
		if !reflect.DeepEqual(here, there) {
			return false
		}
	}
	if here.block(b.block) != there.block(src.index) {
		return false
	}
	return b.looksAs(x, &src.inLook, src.anyInName)
}

// nameWatch is the input of the block being lowered and whether
// LastName read its name since the block began (outside a block it
// means nothing: lowerBlock sets it at each block).
type nameWatch struct {
	of   Value
	read bool
}

// looksAs is reflect.DeepEqual(b.look(x), *w) without its allocations
// (two per call, at every block of a 65,536-block repeat): ValueInfo's
// fields one by one, a nil shape apart from an empty one as DeepEqual
// tells them; the names are not compared when anyName is set.
func (b *Builder) looksAs(x Value, w *ValueInfo, anyName bool) bool {
	v := b.look(x)
	return (anyName || v.Name == w.Name) && (v.Shape == nil) == (w.Shape == nil) && slices.Equal(v.Shape, w.Shape) &&
		v.Dtype == w.Dtype && v.Bytes == w.Bytes && v.Grad == w.Grad && v.Cat == w.Cat &&
		v.Producer == w.Producer && v.Why == w.Why && v.Cached == w.Cached && v.Fused == w.Fused && v.GradDType == w.GradDType && v.Routed == w.Routed
}

// looksAs compares these fields: a field added to ValueInfo stops this
// conversion compiling until it joins the comparison.
var _ = ValueInfo(struct {
	Name      string
	Shape     []int64
	Dtype     units.DType
	Bytes     int64
	Grad      bool
	Cat       Category
	Producer  int32
	Why       string
	Cached    bool
	Fused     bool
	GradDType units.DType
	Routed    int32
}{})

// cloneBlock appends a copy of src as block b.block on input x, under the
// module path the caller opened, and returns the copy's output.
func (b *Builder) cloneBlock(src *blockCopy, x Value) Value {
	p, s := b.P, b.source(src) // where the copy goes, and where its block is
	f, l := src.first, src.last
	dOps, dVals, dParams := len(p.Ops)-f.ops, len(p.Values)-f.values, len(p.Params)-f.params
	dRegions, dBlock := int32(len(p.Regions)-f.regions), int32(b.block-src.index)
	// The copies' names share a string (cloneArena).
	room := b.roomOf(src)
	d := len(b.prefix) - len(src.prefix)
	all, used := b.cloneNames(src, room), 0 // every renamed name and why, in the order taken below
	rename := func(s string) string {
		n := len(s) + d
		name := all[used : used+n]
		used += n
		return name
	}
	renameWhy := func(s string, parts []string) string { // s with the block's path renamed (copyable checked that it renames)
		if parts == nil {
			return s
		}
		n := len(s) + (len(parts)-1)*d
		why := all[used : used+n]
		used += n
		return why
	}
	// A copy's shapes are its source's: nothing writes a shape once made
	// (a lowering passes its inputs' shapes on as its outputs', and makes
	// a new slice to change one), and each is capped at its length, so
	// that an append makes a new array rather than write past the
	// source's (copying them into an arena was 45 MB per
	// BenchmarkSearchLlama70B1024 op).
	shape := func(s []int64) []int64 {
		if s == nil {
			return nil
		}
		return s[:len(s):len(s)]
	}
	val := func(v Value) Value {
		switch {
		case v == src.in:
			return x
		case int(v) >= f.values && int(v) < l.values:
			return v + Value(dVals)
		}
		return v
	}
	region := func(id int32) int32 {
		if int(id) > f.regions && int(id) <= l.regions {
			return id + dRegions
		}
		return id
	}
	// One backing array for the copies' value and parameter lists, each
	// list capped at its length so that an append cannot reach the next.
	vals, params := b.clones.vals.take(room.vals), b.clones.params.take(room.params)
	mapVals := func(vs []Value) []Value {
		if vs == nil {
			return nil
		}
		i := len(vals)
		for _, v := range vs {
			vals = append(vals, val(v))
		}
		return vals[i:len(vals):len(vals)]
	}
	// The ops and values are written in place, each copied once (a range
	// copy and an append copied each op twice: 200-byte structs).
	p.Ops = slices.Grow(p.Ops, l.ops-f.ops)
	p.Ops = p.Ops[:len(p.Ops)+l.ops-f.ops]
	for i := f.ops; i < l.ops; i++ {
		op := &p.Ops[i+dOps]
		*op = s.Ops[i]
		same := op.Module == op.Name // an op named as its module (a linear's matmul): one string for both
		op.Name = rename(op.Name)
		if same {
			op.Module = op.Name
		} else {
			op.Module = rename(op.Module)
		}
		op.In, op.Out, op.Saved = mapVals(op.In), mapVals(op.Out), mapVals(op.Saved)
		if op.Params != nil {
			i := len(params)
			for _, pi := range op.Params {
				if int(pi) >= f.params && int(pi) < l.params {
					pi += int32(dParams)
				}
				params = append(params, pi)
			}
			op.Params = params[i:len(params):len(params)]
		}
		op.Region = region(op.Region)
		if op.Block == int32(src.index)+1 {
			op.Block += dBlock
		}
	}
	p.Values = slices.Grow(p.Values, l.values-f.values)
	p.Values = p.Values[:len(p.Values)+l.values-f.values]
	for i := f.values; i < l.values; i++ {
		v := &p.Values[i+dVals]
		*v = s.Values[i]
		v.Name, v.Shape = rename(v.Name), shape(v.Shape)
		v.Why = renameWhy(v.Why, room.valueWhys[i-f.values])
		if int(v.Producer) >= f.ops && int(v.Producer) < l.ops {
			v.Producer += int32(dOps)
		}
	}
	for _, pi := range s.Params[f.params:l.params] {
		pi.Name, pi.Shape = rename(pi.Name), shape(pi.Shape)
		if int(pi.TiedTo) >= f.params && int(pi.TiedTo) < l.params {
			pi.TiedTo += int32(dParams)
		}
		p.Params = append(p.Params, pi)
	}
	for _, r := range s.Regions[f.regions:l.regions] {
		r.name, r.Parent = rename(r.name), region(r.Parent)
		r.First, r.End = r.First+int32(dOps), r.End+int32(dOps)
		p.Regions = append(p.Regions, r)
	}
	for _, g := range s.Graphs[f.graphs:l.graphs] {
		g.Name, g.First, g.End = rename(g.Name), g.First+int32(dOps), g.End+int32(dOps)
		p.Graphs = append(p.Graphs, g)
	}
	for _, c := range s.Comm[f.comm:l.comm] {
		if c.Beside > 0 && int(c.Beside) > f.ops && int(c.Beside) <= l.ops {
			c.Beside += int32(dOps)
		}
		p.Comm = append(p.Comm, c)
	}
	for i, bu := range s.Buffers[f.buffers:l.buffers] {
		bu.Name, bu.Shape = rename(bu.Name), shape(bu.Shape)
		bu.Why = renameWhy(bu.Why, room.bufferWhys[i])
		p.Buffers = append(p.Buffers, bu)
	}
	b.block++
	return val(src.out)
}

// cloneNames writes the renamed names and whys of a copy of src, as
// cloneBlock takes them (each op's name, then its module unless it is the
// name; each value's name and renamed why; each parameter's, region's and
// graph's name; each buffer's name and renamed why), into the name slab
// at once and returns them as one string. They are written into a
// scratch slice first: appends to a local slice are plain memory moves,
// where writing into the strings.Builder read and wrote the builder's
// fields at every piece, a checked access each under the race detector
// (a fifth of the lowering's checks on the FuzzSizes inputs of 65,536
// blocks). With a name table (ProgramBuffers.Names) the text is the
// table's: looked up by the block's template and the copy's path, and
// written only when the table has none.
func (b *Builder) cloneNames(src *blockCopy, room *cloneRoom) string {
	t := b.clones.shared
	if t != nil && room.template == nil {
		cuts := b.clones.cuts[:0]
		text := b.appendNames(b.clones.scratch[:0], src, room, "", &cuts)
		room.template = t.template(text, cuts)
		b.clones.scratch, b.clones.cuts = text[:0], cuts[:0]
		b.clones.last.room = nil // the scratch holds the template now
	}
	if t != nil && room.template != nil {
		if s, ok := t.textOf(room.template, b.prefix); ok {
			return s
		}
	}
	text := b.namesOf(src, room)
	b.clones.scratch = text[:0]
	if t != nil && room.template != nil {
		if s, ok := t.keep(room.template, b.prefix, text); ok {
			return s
		}
	}
	names := b.clones.room(len(text)) // no reallocation: the Builder's bytes stay put
	at := names.Len()
	names.Write(text)
	return names.String()[at:]
}

// appendNames appends cloneNames' text for a copy of src under module
// path prefix to text; with cuts, it records where in text each prefix
// begins (the text and cuts of prefix "" are the block's template: the
// text of any prefix follows from them).
func (b *Builder) appendNames(text []byte, src *blockCopy, room *cloneRoom, prefix string, cuts *[]int32) []byte {
	p, f, l := b.source(src), src.first, src.last
	from := len(src.prefix)
	pre := func() {
		if cuts != nil {
			*cuts = append(*cuts, int32(len(text)))
		}
		text = append(text, prefix...)
	}
	for i := f.ops; i < l.ops; i++ {
		op := &p.Ops[i]
		name, module := op.Name, op.Module
		pre()
		text = append(text, name[from:]...)
		if module != name {
			pre()
			text = append(text, module[from:]...)
		}
	}
	why := func(parts []string) {
		for k, part := range parts {
			if k > 0 {
				pre()
			}
			text = append(text, part...)
		}
	}
	for i := f.values; i < l.values; i++ {
		pre()
		text = append(text, p.Values[i].Name[from:]...)
		why(room.valueWhys[i-f.values])
	}
	for i := f.params; i < l.params; i++ {
		pre()
		text = append(text, p.Params[i].Name[from:]...)
	}
	for i := f.regions; i < l.regions; i++ {
		pre()
		text = append(text, p.Regions[i].name[from:]...)
	}
	for i := f.graphs; i < l.graphs; i++ {
		pre()
		text = append(text, p.Graphs[i].Name[from:]...)
	}
	for i := f.buffers; i < l.buffers; i++ {
		pre()
		text = append(text, p.Buffers[i].Name[from:]...)
		why(room.bufferWhys[i-f.buffers])
	}
	return text
}
