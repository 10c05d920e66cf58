package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The step replay: one steady-state training step (optimizer state exists,
// gradients set to None between steps) as a timeline of allocations and
// frees through the allocator model.

// Phase is where in the step an allocation happens.
type Phase uint8

// The phases of a step, in order.
const (
	PhaseSetup      Phase = iota // parameters, state and the batch, before the step
	PhaseValidation              // a validation forward before the step (Plan.Validation)
	PhaseGeneration              // GRPO's generation with transformers' generate before the step (core.Plan.Generates)
	PhaseForward
	PhaseRecompute // a checkpointed region's forward, again, in the backward
	PhaseBackward
	PhaseOptimizer
)

var phaseNames = [...]string{"setup", "validation", "generation", "forward", "recompute", "backward", "optimizer"}

// ParsePhase finds a phase by name.
func ParsePhase(name string) (Phase, bool) {
	for i, n := range phaseNames {
		if n == name {
			return Phase(i), true
		}
	}
	return 0, false
}

// String is the phase's name, as reports and the JSON document write it.
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// Alloc describes one allocation of the step.
type Alloc struct {
	Tensor string
	Op     string
	Shape  []int64
	DType  units.DType
	Bytes  int64
	Why    string
	Phase  Phase
	Cat    core.Category
}

// Point is one timeline sample, taken after each allocation or free.
type Point struct {
	Phase     Phase
	Op        string
	Allocated int64
	Reserved  int64
	ByCat     [core.NumCategories]int64
}

type Replay struct {
	nonTorch int64 // device memory outside PyTorch's allocator (context, NCCL)
	P        *core.Program
	Plan     *core.Plan
	opts     core.Options
	alloc    alloc.Allocator
	traced   map[*alloc.Block]tracedTensor // with Options.Trace: the blocks in use and their tensors (trace.go)

	heldDropped bool // the caller's values held through the backward (Program.HeldBackward) are dropped
	fwdDropped  bool // the output's values held to the end of the forward (Program.HeldForward) are dropped

	stream        alloc.Stream // the stream allocations go to (streams.go)
	freeEvents    []int64      // FSDP1's rate limiter: the marks of queued reshard free events
	keptAllGather int32        // FSDP2: the all-gather output the forward keeps until the next copy-out, none
	keptRSInput   int32        // FSDP2: the reduce-scatter input kept until the next post_backward or the backward's end, none
	backwardBlas  bool         // the backward thread's cuBLAS workspace is allocated (cublas.go)
	sideBlas      [2]bool      // the forward's and the backward's thread's cuBLAS workspaces on the shared expert's stream (cublas.go)
	graphs        *graphPool   // compiled graphs replayed as CUDA graphs, nil = none (cudagraphs.go)
	workIDs       []int32      // room for the tensors of one op's workspace (ops.go: workspace)

	live tensors // by tensor id
	cur  [core.NumCategories]int64

	phase Phase
	op    string

	// per value
	valT   []int32 // live tensor id, -1 when not live
	gradT  []int32
	holds  []int32
	done   []bool
	last   []int32 // last forward consumer
	rLast  []int32 // last consumer within the region being recomputed
	nUsers []int32

	paramGrad []int32
	paramLast []int32 // earliest op reading the parameter (its last backward)
	gradFresh []bool  // the parameter's gradient was made in this backward (not kept from before it)

	regionIn [][]core.Value
	kept     []bool // held by a checkpoint policy since the forward, not yet taken by its recompute
	Redone   []bool
	gradless []bool // by param: gets no gradient in a step like this one (gradlessParams)
	Saved    []bool // held for backward at the end of the forward
	// hostHolds counts the ops of offloaded regions saving each value
	// (save_on_cpu copies it once per save); nil without such regions.
	hostHolds []int32

	Rep *Report
	off *offloadRecord // offload bookkeeping, nil without offload

	Dist *distState // data-parallel sharding and pipeline seeds, nil on one GPU

	tpool *tablePool // exact-size pool for table buffers, nil = none

	// lazy: a first step replayed before the steady one (lazy_states.go): the
	// optimizer's moments are made by its step, not before it; pending
	// holds them until then; lazyIDs holds the tensors the step makes and
	// keeps (the moments, cuBLAS workspaces), in the order it makes them.
	lazy bool
	// quiet: a first step past its setup, whose report r reads only for
	// its peak reserved memory and its OOM (lazy_states.go): allocations
	// keep no other peak, largest allocation, reserve growth or timeline,
	// and the step counts no FLOPs or saved bytes.
	quiet bool
	// Setup's persistent state, as the batch comes: its tensors, its
	// timeline's points, its largest allocation.
	batchAt      int32
	setupPoints  int
	setupLargest Alloc
	pending      []Alloc
	lazyIDs      []int32

	fwdPhase  Phase         // the forward's phase: PhaseForward, or PhaseValidation
	valProg   *core.Program // the validation pass to replay before the step's batch, nil = none
	valPlan   *core.Plan
	genProg   *core.Program // GRPO's generation phase to replay before the step's batch, nil = none (generation.go)
	genPlan   *core.Plan
	genDone   bool    // the generation phase is replayed
	gatherIDs []int32 // ZeRO-3's parameters gathered for the generation (generation.go), reused

	growth alloc.Growth // the last request no cached block fitted (alloc.Allocator.Grew)
	grew   bool         // the allocation being made grew the reserve
	// peakCache says that allocated memory is at a new peak whose free
	// blocks are not recorded yet: recordPeakCache records them before
	// the next free, the first event that can leave the peak without
	// raising it (an allocation raises it, and makes the old one moot).
	peakCache bool
	// stopAt, when > 0, is the most reserved memory at which the step
	// stops (RunBelow's limit less the memory outside the allocator):
	// stopped says it did.
	stopAt  int64
	stopped bool
	// lists holds the lists this replay's state was made in, from
	// scratch, for Recycle to hand back (nil: lists of its own).
	lists *stateLists
	// readsOwn: last, Saved, regionIn and paramLast are lists' (this
	// replay read its program into them), handed back by Recycle; a
	// sibling's are its replay's.
	readsOwn bool
	scratch  *Scratch
}

const none = -1

func NewReplay(p *core.Program, plan *core.Plan, opts core.Options, limit int64) *Replay {
	return newReplayIn(p, plan, opts, limit, nil)
}

// newReplayIn is NewReplay with its step state made in lists s keeps
// (nil: lists of its own).
func newReplayIn(p *core.Program, plan *core.Plan, opts core.Options, limit int64, s *Scratch) *Replay {
	r := newReplayState(p, plan, opts, limit, s)
	if l := r.lists; l != nil { // the lists of a finished replay's reading (its Scratch's)
		r.last = fill(sized(l.last, len(p.Values)), none)
		r.Saved = zeroed(sized(l.saved, len(p.Values)))
		r.regionIn = sized(l.regionIn, len(p.Regions))
		for i := range r.regionIn {
			r.regionIn[i] = r.regionIn[i][:0]
		}
		r.paramLast = fill(sized(l.paramLast, len(p.Params)), none)
		r.readsOwn = true
	} else {
		r.last = fill(make([]int32, len(p.Values)), none)
		r.Saved = make([]bool, len(p.Values))
		r.regionIn = make([][]core.Value, len(p.Regions))
		r.paramLast = fill(make([]int32, len(p.Params)), none)
	}
	r.analyse()
	r.gradless = gradlessParams(p)
	r.initHolds()
	return r
}

// sibling is a new replay of r's program and plan, on an allocator of
// limit bytes, that shares r's reading of the program (analyse,
// gradlessParams: written only by NewReplay, read only after it) and
// has a step state of its own: a first step replayed before r's
// (warmFirstStep) reads the program as r does, and need not read it again.
func (r *Replay) sibling(limit int64, scratch *Scratch) *Replay {
	s := newReplayState(r.P, r.Plan, r.opts, limit, scratch)
	s.last, s.Saved, s.regionIn, s.paramLast, s.gradless, s.hostHolds = r.last, r.Saved, r.regionIn, r.paramLast, r.gradless, r.hostHolds
	s.initHolds()
	return s
}

// newReplayState is a replay of p with its step state made (every value
// and parameter without a tensor), before its reading of the program,
// in lists s keeps (nil: lists of its own).
func newReplayState(p *core.Program, plan *core.Plan, opts core.Options, limit int64, s *Scratch) *Replay {
	nv := len(p.Values)
	r := &Replay{P: p, Plan: plan, opts: opts, alloc: alloc.Allocator{Limit: limit, Expandable: plan.ExpandableSegments}, Rep: &Report{},
		fwdPhase: PhaseForward, keptAllGather: none, keptRSInput: none}
	r.alloc.Grew = func(g alloc.Growth) { r.growth, r.grew = g, true }
	if r.graphs = newGraphPool(p, plan); r.graphs != nil {
		r.alloc.Private = StreamGraphPool
	}
	if opts.Trace {
		r.Rep.Trace = &Trace{modules: map[string]string{}}
		for _, op := range p.Ops {
			r.Rep.Trace.modules[op.Name] = op.Module
		}
		r.traced = map[*alloc.Block]tracedTensor{}
		r.alloc.Observe = r.traceSegment
	}
	r.live.shift = chunkShift(min(max(2*(nv+len(p.Params)), 64), 1<<20))
	l := s.take()
	if s != nil {
		r.lists, r.scratch = l, s
	}
	r.live.reuse(l.chunks)
	if r.traced == nil {
		r.alloc.Reuse(l.slabs)
	}
	l.slabs = alloc.Slabs{} // r's now (or dropped, with a trace)
	r.valT = fill(sized(l.valT, nv), none)
	r.gradT = fill(sized(l.gradT, nv), none)
	r.holds = zeroed(sized(l.holds, nv))
	r.done = zeroed(sized(l.done, nv))
	r.rLast = fill(sized(l.rLast, nv), none)
	r.paramGrad = fill(sized(l.paramGrad, len(p.Params)), none)
	r.gradFresh = zeroed(sized(l.gradFresh, len(p.Params)))
	r.kept = zeroed(sized(l.kept, nv))
	r.Redone = zeroed(sized(l.redone, len(p.Regions)))
	return r
}

// zeroed sets every element of xs to its zero value.
func zeroed[T any](xs []T) []T {
	clear(xs)
	return xs
}

// initHolds sets, before a step's forward, how many holders keep each
// value: the ops that save it, the checkpoint regions it enters, the
// autocast cache, and the caller (the batch, the loss, held values).
func (r *Replay) initHolds() {
	p := r.P
	holds, kept := r.holds, r.kept
	clear(holds)
	for i := range p.Ops {
		if op := &p.Ops[i]; r.savesOnItsOwn(op) {
			for _, v := range op.Saved {
				holds[v]++
			}
		}
	}
	for id, in := range r.regionIn {
		if p.Regions[id].Parent != 0 {
			continue // held from the enclosing region's recompute on
		}
		for _, v := range in {
			holds[v]++
		}
	}
	clear(kept)
	for i := range p.Ops {
		if op := &p.Ops[i]; r.keeps(op) {
			for _, v := range op.Out {
				holds[v]++
				kept[v] = true
			}
		}
	}
	for v := range p.Values {
		if p.Values[v].Cached {
			holds[v]++
		}
	}
	if p.Input != core.NoValue && !p.InputTransient {
		r.holds[p.Input]++ // the caller's batch lives for the whole step
	}
	if p.Labels != core.NoValue {
		r.holds[p.Labels]++ // and its labels
	}
	for _, v := range p.BatchExtra {
		r.holds[v]++ // and the batch's other tensors
	}
	if p.Loss != core.NoValue {
		r.holds[p.Loss]++
	}
	for _, v := range p.Held { // values the caller keeps until the step ends
		r.holds[v]++
	}
	for _, v := range p.HeldBackward { // and those it keeps through the backward
		r.holds[v]++
	}
	for _, v := range p.HeldForward { // and those the model's output keeps to the end of the forward
		r.holds[v]++
	}
}

// savesOnItsOwn reports whether op keeps what it saves from the forward:
// outside checkpoint regions, or in an offloaded one (core.Region.Offload:
// kept in host memory).
func (r *Replay) savesOnItsOwn(op *core.OpInfo) bool {
	return op.Region == 0 || r.P.Regions[op.Region-1].Offload
}

// keeps reports whether a checkpoint policy keeps op's outputs from the
// forward (core.OpInfo.Keep) in a region that records a graph.
func (r *Replay) keeps(op *core.OpInfo) bool {
	return op.Keep && op.Region != 0 && !r.P.Regions[op.Region-1].NoGrad
}

// takeKept hands a kept output to the recomputation: the policy's hold
// ends and the value lives on as a recomputed one.
func (r *Replay) takeKept(v core.Value) {
	r.done[v] = false
	if r.kept[v] {
		r.kept[v] = false
		r.holds[v]--
	}
}

// fill sets every element of s to x. It writes one element and copies
// what it has written onto the rest, doubling: under the race detector a
// copy is one checked range, where a loop's every write was a checked call
// (six slices of a value or parameter each, 400,000 long in a
// 65,536-layer step's replay).
func fill(s []int32, x int32) []int32 {
	if len(s) == 0 {
		return s
	}
	s[0] = x
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
	return s
}

func contains(vs []core.Value, v core.Value) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func (r *Replay) resolve(pi int32) int32 {
	if t := r.P.Params[pi].TiedTo; t >= 0 {
		return t
	}
	return pi
}

// allocate records one allocation and returns its tensor id.
func (r *Replay) allocate(a Alloc) int32 { return r.allocateParts(a, allocParts{}) }

// allocParts are the parts of an allocation's description that allocate
// joins only when the report keeps the allocation (the largest, the OOM,
// the growth at the peak, a trace event): a step makes tens of thousands
// of gradient and workspace tensors, and joining every name was a third
// of a replay's heap allocations (BenchmarkEvaluateLlama70B3D).
type allocParts struct {
	tensor, why string // prefixes of Alloc.Tensor and Alloc.Why
	sep         string // between tensor and Alloc.Tensor
	whyTail     string // suffix of Alloc.Why
	dim         int64  // when > 0, the shape is [dim]
}

// join is a with its description complete.
func (p allocParts) join(a Alloc) Alloc {
	a.Tensor, a.Why = p.tensor+p.sep+a.Tensor, p.why+a.Why+p.whyTail
	if p.dim > 0 {
		a.Shape = []int64{p.dim}
	}
	return a
}

// allocateParts is allocate of a, described as parts joins it.
//
//go:norace
func (r *Replay) allocateParts(a Alloc, parts allocParts) int32 {
	if a.Bytes <= 0 {
		a.Bytes = 1
	}
	blk, ok := r.allocBlock(a.Bytes)
	return r.allocated(a, parts, blk, ok)
}

// release frees tensor id's block.
//
//go:norace
func (r *Replay) release(id int32) {
	t := r.live.at(id)
	if t.blk == 0 {
		return
	}
	blk := r.alloc.Block(t.blk)
	r.cur[t.cat] -= blk.Size
	if r.peakCache {
		r.recordPeakCache()
	}
	traced := r.traced
	var addr int64
	if traced != nil {
		addr = r.alloc.Addr(blk) // before the block merges with free neighbours
	}
	r.alloc.Release(blk)
	if traced != nil {
		r.traceFree(blk, addr)
	}
	t.blk = 0
	// A release raises neither peak (allocated memory falls, the reserve
	// stays: only a request releases cached segments, and every request
	// was sampled): what sample would do here is the timeline's point.
	if r.opts.Timeline && !r.quiet {
		r.Rep.Timeline = append(r.Rep.Timeline, Point{Phase: r.phase, Op: r.op, Allocated: r.alloc.Allocated, Reserved: r.alloc.Reserved, ByCat: r.cur})
	}
}

// sample updates peaks and the timeline after each event.
//
//go:norace
func (r *Replay) sample() {
	rep := r.Rep
	allocated, reserved := r.alloc.Allocated, r.alloc.Reserved
	if allocated > rep.PeakAllocated {
		r.allocatedPeak(allocated)
	}
	if reserved > rep.PeakReserved {
		rep.PeakReserved = reserved
	}
	if r.opts.Timeline {
		rep.Timeline = append(rep.Timeline, Point{Phase: r.phase, Op: r.op, Allocated: allocated, Reserved: reserved, ByCat: r.cur})
	}
}

// allocatedPeak makes now, with allocated bytes allocated, the peak of
// allocated memory.
//
//go:norace
func (r *Replay) allocatedPeak(allocated int64) {
	rep := r.Rep
	rep.PeakAllocated = allocated
	rep.peakCat = r.cur
	// Streams the allocator has not seen hold nothing, at this peak as
	// at every earlier one: their entries stay zero.
	for s := range min(r.alloc.Streams(), numStreams) {
		rep.peakStream[s] = streamUse{r.alloc.AllocatedOn(alloc.Stream(s)), r.alloc.ReservedOn(alloc.Stream(s))}
	}
	rep.PeakAt = PeakAt{Phase: r.phase, Op: r.op}
	r.peakCache = true
}

// recordPeakCache records the free blocks of the peak of allocated memory,
// while the allocator is still in that state.
//
//go:norace
func (r *Replay) recordPeakCache() {
	if r.peakCache {
		r.Rep.Frag.AtPeak = [2]alloc.Cache{r.alloc.Cached(0), r.alloc.Cached(1)}
		r.peakCache = false
	}
}

// produce allocates value v.
func (r *Replay) produce(v core.Value) {
	vi := &r.P.Values[v]
	if vi.Fused { // inside a fused kernel of a compiled graph: never in memory
		r.done[v] = false
		return
	}
	n := max(vi.Bytes, 1) // as allocateParts asks
	if vi.Routed != 0 {
		n = r.routedBytes(v, n) // routing.go
	}
	if blk, ok := r.allocBlock(n); r.plain(n, ok) {
		r.valT[v] = r.keepPlain(blk, vi.Cat)
	} else {
		r.valT[v] = r.allocated(Alloc{Tensor: vi.Name, Shape: vi.Shape, DType: vi.Dtype, Bytes: n, Why: vi.Why, Cat: vi.Cat}, allocParts{}, blk, ok)
	}
	r.done[v] = false
}

// maybeFree frees value v when its last reader has run (done) and
// nothing holds it. It and its callers read each slice and element once:
// under the race detector every read is a checked call, at every value of
// every op of the step.
//
//go:norace
func (r *Replay) maybeFree(v core.Value) {
	if r.done[v] && r.holds[v] <= 0 {
		r.freeValue(v)
	}
}

// freeValue releases v's tensor, if it has one.
//
//go:norace
func (r *Replay) freeValue(v core.Value) {
	valT := r.valT
	if t := valT[v]; t != none {
		r.release(t)
		valT[v] = none
	}
}

// finished marks v done (its last reader has run) and frees it when
// nothing holds it.
//
//go:norace
func (r *Replay) finished(v core.Value) {
	r.done[v] = true
	if r.holds[v] <= 0 {
		r.freeValue(v)
	}
}

// dropHeldBackward drops what the caller held through the backward
// (keep_logits: the loop deletes its output before the optimizer step),
// once.
func (r *Replay) dropHeldBackward() { r.dropOnce(&r.heldDropped, r.P.HeldBackward) }

// dropHeldForward drops what the model's output held to the end of the
// forward (use_cache's DynamicCache: the caller drops the output before
// its backward), once.
func (r *Replay) dropHeldForward() { r.dropOnce(&r.fwdDropped, r.P.HeldForward) }

// dropOnce drops one holder of each of vals unless *dropped says it was
// done, and marks it done.
//
//go:norace
func (r *Replay) dropOnce(dropped *bool, vals []core.Value) {
	if *dropped {
		return
	}
	*dropped = true
	for _, v := range vals {
		r.unhold(v)
	}
}

// unhold drops one holder of v and frees it when it was the last and v
// is done.
//
//go:norace
func (r *Replay) unhold(v core.Value) {
	holds := r.holds
	n := holds[v] - 1
	holds[v] = n
	if n <= 0 && r.done[v] {
		r.freeValue(v)
	}
}
