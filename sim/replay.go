package sim

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/units"
)

// The step replay: one steady-state training step (optimizer state exists,
// gradients set to None between steps) as a timeline of allocations and
// frees through the allocator model.

// Phase names.
const (
	PhaseSetup     = "setup"
	PhaseForward   = "forward"
	PhaseRecompute = "recompute"
	PhaseBackward  = "backward"
	PhaseOptimizer = "optimizer"
)

// Alloc describes one allocation of the step.
type Alloc struct {
	Tensor string
	Op     string
	Shape  []int64
	DType  units.DType
	Bytes  int64
	Why    string
	Phase  string
	Cat    Category
}

// Point is one timeline sample, taken after each allocation or free.
type Point struct {
	Phase     string
	Op        string
	Allocated int64
	Reserved  int64
	ByCat     [numCategories]int64
}

type liveTensor struct {
	blk *alloc.Block
	cat Category
}

type Replay struct {
	nonTorch int64 // device memory outside PyTorch's allocator (context, NCCL)
	p        *Program
	Plan     *Plan
	opts     Options
	alloc    alloc.Allocator

	live []liveTensor // by tensor id
	cur  [numCategories]int64

	phase string
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

	regionIn [][]Value
	redone   []bool
	gradless []bool // by param: read only inside reentrant regions that record no graph (checkpoint.go)
	Saved    []bool // held for backward at the end of the forward

	rep *Report
	off *offloadRecord // offload bookkeeping (offload.go), nil without offload

	dist *distState // data-parallel sharding and pipeline seeds (sharding.go), nil on one GPU

	tpool *tablePool // exact-size pool for table buffers (table_steps.go), nil = none

	fwdPhase string   // the forward's phase: PhaseForward, or PhaseValidation (validation.go)
	valProg  *Program // the validation pass to replay before the step's batch, nil = none (validation.go)
	valPlan  *Plan
}

const none = -1

func NewReplay(p *Program, plan *Plan, opts Options, limit int64) *Replay {
	nv := len(p.Values)
	r := &Replay{p: p, Plan: plan, opts: opts, alloc: alloc.Allocator{Limit: limit, Expandable: plan.ExpandableSegments}, rep: &Report{},
		fwdPhase: PhaseForward}
	r.valT = fill(make([]int32, nv), none)
	r.gradT = fill(make([]int32, nv), none)
	r.holds = make([]int32, nv)
	r.done = make([]bool, nv)
	r.last = fill(make([]int32, nv), none)
	r.rLast = fill(make([]int32, nv), none)
	r.paramGrad = fill(make([]int32, len(p.Params)), none)
	r.paramLast = fill(make([]int32, len(p.Params)), none)
	r.Saved = make([]bool, nv)
	r.regionIn = make([][]Value, len(p.regions))
	r.redone = make([]bool, len(p.regions))
	for i := range p.Ops {
		op := &p.Ops[i]
		for _, v := range op.in {
			r.last[v] = int32(i)
			pr := p.Values[v].producer
			if op.Region != 0 && !p.regions[op.Region-1].noGrad && (pr < 0 || p.Ops[pr].Region != op.Region) && !contains(r.regionIn[op.Region-1], v) {
				r.regionIn[op.Region-1] = append(r.regionIn[op.Region-1], v)
				r.Saved[v] = true
			}
		}
		if op.Region == 0 {
			for _, v := range op.saved {
				r.Saved[v] = true
			}
		}
		for _, pi := range op.params {
			pi = r.resolve(pi)
			if r.paramLast[pi] == none {
				r.paramLast[pi] = int32(i)
			}
		}
	}
	r.gradless = gradlessParams(p)
	r.initHolds()
	return r
}

// gradlessParams marks the parameters that every reading op reads inside a
// reentrant checkpoint region that records no graph: they get no gradient,
// and torch.optim makes state only for parameters that have one.
func gradlessParams(p *Program) []bool {
	read := make([]bool, len(p.Params))
	withGrad := make([]bool, len(p.Params))
	for i := range p.Ops {
		op := &p.Ops[i]
		for _, pi := range op.params {
			if t := p.Params[pi].TiedTo; t >= 0 {
				pi = t
			}
			read[pi] = true
			if op.Region == 0 || !p.regions[op.Region-1].noGrad {
				withGrad[pi] = true
			}
		}
	}
	out := make([]bool, len(p.Params))
	for i := range out {
		out[i] = read[i] && !withGrad[i]
	}
	return out
}

// initHolds sets, before a step's forward, how many holders keep each
// value: the ops that save it, the checkpoint regions it enters, the
// autocast cache, and the caller (the batch, the loss, held values).
func (r *Replay) initHolds() {
	p := r.p
	clear(r.holds)
	for i := range p.Ops {
		if p.Ops[i].Region == 0 {
			for _, v := range p.Ops[i].saved {
				r.holds[v]++
			}
		}
	}
	for _, in := range r.regionIn {
		for _, v := range in {
			r.holds[v]++
		}
	}
	for v := range p.Values {
		if p.Values[v].cached {
			r.holds[v]++
		}
	}
	if p.Input != NoValue && !p.inputTransient {
		r.holds[p.Input]++ // the caller's batch lives for the whole step
	}
	if p.Loss != NoValue {
		r.holds[p.Loss]++
	}
	for _, v := range p.held { // chunked_loss.go: values the caller keeps until the step ends
		r.holds[v]++
	}
}

func fill(s []int32, x int32) []int32 {
	for i := range s {
		s[i] = x
	}
	return s
}

func contains(vs []Value, v Value) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func (r *Replay) resolve(pi int32) int32 {
	if t := r.p.Params[pi].TiedTo; t >= 0 {
		return t
	}
	return pi
}

// allocate records one allocation and returns its tensor id.
func (r *Replay) allocate(a Alloc) int32 {
	if a.Bytes <= 0 {
		a.Bytes = 1
	}
	blk, ok := r.alloc.Alloc(a.Bytes)
	a.Phase, a.Op = r.phase, r.op
	r.live = append(r.live, liveTensor{blk: blk, cat: a.Cat})
	r.cur[a.Cat] += blk.Size
	rep := r.rep
	if !ok && rep.OOM == nil {
		rep.OOM = r.oomAt(a)
	}
	if a.Bytes > rep.Largest.Bytes {
		rep.Largest = a
	}
	r.sample()
	return int32(len(r.live) - 1)
}

func (r *Replay) release(id int32) {
	t := &r.live[id]
	if t.blk == nil {
		return
	}
	r.cur[t.cat] -= t.blk.Size
	r.alloc.Release(t.blk)
	t.blk = nil
	r.sample()
}

// sample updates peaks and the timeline after each event.
func (r *Replay) sample() {
	rep := r.rep
	if r.alloc.Allocated > rep.PeakAllocated {
		rep.PeakAllocated = r.alloc.Allocated
		rep.peakCat = r.cur
		rep.peakReservedThen = r.alloc.Reserved
		rep.PeakAt = PeakAt{Phase: r.phase, Op: r.op}
	}
	if r.alloc.Reserved > rep.PeakReserved {
		rep.PeakReserved = r.alloc.Reserved
	}
	if r.opts.Timeline {
		rep.Timeline = append(rep.Timeline, Point{Phase: r.phase, Op: r.op, Allocated: r.alloc.Allocated, Reserved: r.alloc.Reserved, ByCat: r.cur})
	}
}

// produce allocates value v.
func (r *Replay) produce(v Value) {
	vi := &r.p.Values[v]
	r.valT[v] = r.allocate(Alloc{Tensor: vi.name, Shape: vi.shape, DType: vi.dtype, Bytes: vi.Bytes, Why: vi.why, Cat: vi.Cat})
	r.done[v] = false
}

func (r *Replay) maybeFree(v Value) {
	if r.done[v] && r.holds[v] <= 0 && r.valT[v] != none {
		r.release(r.valT[v])
		r.valT[v] = none
	}
}

func (r *Replay) unhold(v Value) {
	r.holds[v]--
	r.maybeFree(v)
}

// forwardOp runs op i; in recompute, consumers are counted within the region.
func (r *Replay) forwardOp(i int, recompute bool) {
	op := &r.p.Ops[i]
	r.op = op.name
	r.beforeForwardOp(i)      // offload.go: stream params
	defer r.afterForwardOp(i) // offload.go: saved activations to host
	for _, v := range op.out {
		r.produce(v)
	}
	if op.workF > 0 {
		r.release(r.allocate(Alloc{Tensor: op.name + " workspace", Shape: []int64{op.workF}, DType: units.INT8, Bytes: op.workF, Why: "forward workspace of " + op.Kind, Cat: CatTemporaries}))
	}
	lastOf := r.last
	if recompute {
		lastOf = r.rLast
	}
	for _, v := range op.in {
		if lastOf[v] == int32(i) && r.valT[v] != none {
			r.done[v] = true
			r.maybeFree(v)
		}
	}
	for _, v := range op.out {
		if lastOf[v] == none {
			r.done[v] = true
			r.maybeFree(v)
		}
	}
}

// recompute re-runs a checkpointed region's forward, keeping what its ops
// save: non-reentrant up to the last op that saves anything (its early
// stop); reentrant the whole region, whose outputs the backward holds
// until the region's backward ends (released in backwardOp).
func (r *Replay) recompute(id int32) {
	reg := r.p.regions[id-1]
	stop := reg.first - 1
	for j := reg.first; j < reg.end; j++ {
		if len(r.p.Ops[j].saved) > 0 || reg.reentrant {
			stop = j
		}
	}
	inRegion := func(v Value) bool {
		pr := r.p.Values[v].producer
		return pr >= reg.first && pr < reg.end
	}
	if reg.reentrant {
		for _, v := range r.regionOutputs(reg) {
			r.holds[v]++
		}
	}
	for j := reg.first; j <= stop; j++ {
		op := &r.p.Ops[j]
		for _, v := range op.out {
			r.rLast[v] = none
		}
		for _, v := range op.in {
			if inRegion(v) {
				r.rLast[v] = j
			}
		}
		for _, v := range op.saved {
			if inRegion(v) {
				r.holds[v]++
			}
		}
	}
	saved := r.phase
	r.phase = PhaseRecompute
	for j := reg.first; j <= stop; j++ {
		r.forwardOp(int(j), true)
	}
	r.phase = saved
	r.redone[id-1] = true
}

// regionOutputs are the values a region makes that ops after it read.
func (r *Replay) regionOutputs(reg region) []Value {
	var out []Value
	for j := reg.first; j < reg.end; j++ {
		for _, v := range r.p.Ops[j].out {
			if r.last[v] >= reg.end {
				out = append(out, v)
			}
		}
	}
	return out
}

// backwardOp runs op i's backward.
func (r *Replay) backwardOp(i int) {
	op := &r.p.Ops[i]
	r.op = op.name
	r.beforeBackwardOp(i)      // offload.go: activations back from host, params streamed
	defer r.afterBackwardOp(i) // offload.go: grads to host
	if op.Region != 0 && !r.redone[op.Region-1] && !r.p.regions[op.Region-1].noGrad {
		r.recompute(op.Region)
		r.op = op.name
	}
	recorded := false
	for _, v := range op.out {
		recorded = recorded || r.p.Values[v].grad
	}
	if recorded {
		work := none
		if op.workB > 0 {
			work = int(r.allocate(Alloc{Tensor: op.name + " backward workspace", Shape: []int64{op.workB}, DType: units.INT8, Bytes: op.workB, Why: "backward workspace of " + op.Kind, Cat: CatTemporaries}))
		}
		if !op.noGradB {
			for _, v := range op.in {
				vi := &r.p.Values[v]
				if vi.grad && r.gradT[v] == none {
					r.gradT[v] = r.allocate(Alloc{Tensor: "grad of " + vi.name, Shape: vi.shape, DType: vi.dtype, Bytes: vi.Bytes, Why: "gradient of " + vi.name, Cat: CatTemporaries})
				}
			}
		}
		for _, pi := range op.params {
			r.paramGradient(r.resolve(pi))
		}
		if work != none {
			r.release(int32(work))
		}
	}
	for _, v := range op.out {
		if r.gradT[v] != none {
			r.release(r.gradT[v])
			r.gradT[v] = none
		}
	}
	for _, v := range op.saved {
		r.unhold(v)
	}
	if op.Region != 0 && r.p.regions[op.Region-1].first == int32(i) {
		for _, v := range r.regionIn[op.Region-1] {
			r.unhold(v)
		}
		if reg := r.p.regions[op.Region-1]; reg.reentrant && r.redone[op.Region-1] {
			for _, v := range r.regionOutputs(reg) {
				r.unhold(v)
			}
		}
	}
	if r.Plan.Optimizer.InBackward {
		for _, pi := range op.params {
			pi = r.resolve(pi)
			if r.paramLast[pi] == int32(i) && r.paramGrad[pi] != none {
				r.stepInBackward(pi)
			}
		}
	}
}

func (r *Replay) paramGradient(pi int32) {
	p := &r.p.Params[pi]
	if !p.Trainable || r.paramGrad[pi] != none || r.dist.gradient(r, pi) { // gather.go
		return
	}
	dt := r.Plan.Precision.Grads
	r.paramGrad[pi] = r.allocate(Alloc{Tensor: p.Name + ".grad", Shape: p.shape, DType: dt, Bytes: dt.Bytes(p.Numel), Why: "gradient of parameter " + p.Name, Cat: CatGrads})
}

// stepInBackward steps one parameter as soon as its gradient is complete
// and frees the gradient (optimizer_in_backward / fused backward step).
func (r *Replay) stepInBackward(pi int32) {
	p := &r.p.Params[pi]
	st := r.Plan.Precision.States
	if tmp := r.Plan.Optimizer.stepTemporary(st.Bytes(p.Numel), st.Bytes(p.Numel)); tmp > 0 {
		r.release(r.allocate(Alloc{Tensor: p.Name + " step temporaries", Shape: []int64{tmp}, DType: units.INT8, Bytes: tmp, Why: "optimizer step temporaries", Cat: CatTemporaries}))
	}
	r.release(r.paramGrad[pi])
	r.paramGrad[pi] = none
}
