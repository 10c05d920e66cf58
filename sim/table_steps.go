package sim

import "fmt"

// Several consecutive steps through one allocator: the allocator lesson of
// SEEDS.md story 4. Without pad_rows a sparse table's leaves have as many
// rows as the step read distinct rows, a different count every step, so
// every step asks for tensors of new sizes.
//
// What PyTorch's caching allocator does with that (allocator.go): freed
// blocks stay cached and a request takes the smallest cached block that
// fits, split when the rest is large enough. A leaf of a head is at most
// positions x dim x 4 bytes (1 MiB for the story: 8,192 rows of 32 fp32),
// so leaves, their gradients and the row-wise optimizer's gathered rows
// live in the small pool (<= 1 MiB, 2 MiB segments) or in 20 MiB large
// segments, and a step of new sizes mostly reuses blocks cached by earlier
// steps. Reserved memory rises to what the largest step needs plus some
// fragmentation, then stays: it does not grow without bound.
//
// What the story's code did: it kept its own buffer pool keyed by tensor
// size (a "size-bucketed buffer pool"), handing a freed buffer back only to
// a request of the same size. Then every new row count adds a new set of
// buffers that are never reused or freed: the pool, and with it PyTorch's
// allocated and reserved memory, grows every step until the card is full
// (the story's 23 GB and OOM). StepSeries.Pool = "exact" models that pool
// for the table's own buffers (the leaves and the row-wise optimizer's
// gathered rows; autograd's gradients still come from the caching
// allocator). pad_rows gives every step the same sizes, so both stay flat.

// StepSeries describes consecutive steps that differ in the rows their
// sparse tables read.
type StepSeries struct {
	// TableRows is, for each step, the distinct rows each head of each
	// sparse table reads. Tables with pad_rows=True pad to the maximum
	// whatever the count.
	TableRows []int64
	// Pool is "torch" (default: PyTorch's caching allocator alone) or
	// "exact" (a pool keyed by exact size in front of it for the tables'
	// own buffers).
	Pool string
}

// StepResult is one step of a series.
type StepResult struct {
	Step          int
	LeafRows      int64 // rows in each head's leaf (distinct, or padded)
	PeakAllocated int64 // torch.cuda.max_memory_allocated over the step
	PeakReserved  int64 // torch.cuda.max_memory_reserved so far
	EndReserved   int64 // reserved after the step's tensors are freed
	PoolIdle      int64 // bytes parked in the exact-size pool after the step
	Fits          bool  // the step ran without an OOM and fits the card
	OOM           *OOM
}

// StepsReport is the result of EvaluateSteps.
type StepsReport struct {
	Capacity int64
	Pool     string
	Steps    []StepResult
	First    *Report // the full report of the first step
}

// EvaluateSteps replays len(s.TableRows) consecutive training steps of the
// plan through one allocator instance. Parameters, master weights,
// optimizer state and the cuBLAS workspace persist across steps; each
// step's gradients, batch and table tensors are freed at its end, as
// optimizer.zero_grad(set_to_none=True) and the training loop do.
func EvaluateSteps(plan *Plan, opts Options, s StepSeries) (*StepsReport, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if plan.Phase == "eval" {
		return nil, &Error{Path: "table_steps", Msg: "a step series needs a training plan (got phase=\"eval\")"}
	}
	pool := s.Pool
	switch pool {
	case "":
		pool = "torch"
	case "torch", "exact":
	default:
		return nil, &Error{Path: "table_steps", Msg: fmt.Sprintf("unknown pool %q (known: torch, exact)", s.Pool),
			Hint: "torch: PyTorch's caching allocator alone; exact: a buffer pool keyed by exact size in front of it"}
	}
	if len(s.TableRows) == 0 {
		return nil, &Error{Path: "table_steps", Msg: "rows_per_step is empty", Hint: "give the distinct rows per head of each step, e.g. [8000, 7900, 8100]"}
	}
	prog, err := plan.lowerProgram()
	if err != nil {
		return nil, err
	}
	var sparse []*tableProg
	for _, tp := range prog.tables {
		if len(tp.heads) > 0 {
			sparse = append(sparse, tp)
		}
	}
	if len(sparse) == 0 {
		return nil, &Error{Path: "table_steps", Msg: "the plan has no table with grad=\"sparse\"",
			Hint: "the rows read per step change tensor sizes only for sparse tables; dense ones read the whole table"}
	}
	for i, n := range s.TableRows {
		for _, tp := range sparse {
			if n < 1 || n > tp.maxLeafRows() {
				return nil, &Error{Path: "table_steps", Msg: fmt.Sprintf("rows_per_step[%d] must be in [1, %d] for table %s (got %d)", i, tp.maxLeafRows(), tp.name, n),
					Hint: "a head reads at most positions x reads per head distinct rows, and no more than its table holds"}
			}
		}
	}
	first, err := Evaluate(plan, opts)
	if err != nil {
		return nil, err
	}
	var nonTorch int64
	for _, o := range first.Overheads {
		nonTorch += o.Bytes
	}
	out := &StepsReport{Capacity: plan.Device.Memory, Pool: pool, First: first}
	var tpool *tablePool
	if pool == "exact" {
		tpool = &tablePool{free: map[int64][]*block{}, bytes: map[int32]int64{}}
	}
	var prev *replay
	persist := int32(0)
	for k, n := range s.TableRows {
		if err := opts.stopped(); err != nil { // plan.go: the caller's context
			return nil, err
		}
		for _, tp := range sparse {
			tp.setLeafRows(prog, n)
		}
		r := newReplay(prog, plan, opts, plan.Device.Memory-nonTorch)
		r.tpool = tpool
		if prev == nil {
			r.setup()
			persist = r.valT[prog.input] // everything before the batch persists (but gradients)
		} else {
			r.carry(prev, persist)
			r.setupStep()
		}
		r.forward()
		r.backward()
		if err := opts.stopped(); err != nil {
			return nil, err
		}
		r.optimizerStep()
		r.finish()
		res := StepResult{Step: k + 1, LeafRows: sparse[0].leafRows, PeakAllocated: r.rep.PeakAllocated, OOM: r.rep.OOM}
		r.endStep(persist)
		res.PeakReserved = r.rep.PeakReserved
		if k > 0 && out.Steps[k-1].PeakReserved > res.PeakReserved {
			res.PeakReserved = out.Steps[k-1].PeakReserved
		}
		res.EndReserved = r.alloc.reserved
		if tpool != nil {
			res.PoolIdle = tpool.idle
		}
		res.Fits = res.OOM == nil && res.PeakReserved+nonTorch <= plan.Device.Memory
		out.Steps = append(out.Steps, res)
		prev = r
	}
	return out, nil
}

// setLeafRows sets the rows of each head's leaf for a step: n distinct
// rows, or the padded maximum with pad_rows.
func (tp *tableProg) setLeafRows(p *program, n int64) {
	if tp.t.PadRows {
		n = tp.maxLeafRows()
	}
	tp.leafRows = n
	for _, hd := range tp.heads {
		v := &p.values[hd.leaf]
		v.shape = []int64{n, tp.t.Dim}
		v.bytes = v.dtype.Bytes(n * tp.t.Dim)
	}
}

// carry continues from the previous step's replay: the same allocator, and
// the persistent tensors (ids below persist) still live.
func (r *replay) carry(prev *replay, persist int32) {
	r.alloc = prev.alloc
	r.live = append(r.live[:0], prev.live[:persist]...)
	for _, t := range r.live {
		if t.blk != nil {
			r.cur[t.cat] += t.blk.size
		}
	}
	r.sample()
}

// setupStep is the part of setup() that each step repeats: accumulated
// gradients (with grad_accum), the batch, and the tables' rows.
func (r *replay) setupStep() {
	r.phase = PhaseSetup
	if r.plan.gradsPersist() {
		r.op = "accumulated gradients"
		for pi := range r.p.params {
			r.paramGradient(int32(pi))
		}
	}
	r.op = "batch"
	r.produce(r.p.input)
	r.setupTableRows()
}

// endStep frees what the step leaves: gradients (set to None), the batch
// and anything else allocated after the persistent state.
func (r *replay) endStep(persist int32) {
	r.phase, r.op = PhaseOptimizer, "zero_grad"
	for pi, id := range r.paramGrad {
		if id != none {
			r.release(id)
			r.paramGrad[pi] = none
		}
	}
	for id := persist; id < int32(len(r.live)); id++ {
		r.release(id)
	}
}

// tablePool is a buffer pool keyed by exact byte size in front of the
// caching allocator, for a table's own per-step buffers: a freed buffer
// is parked under its size and handed only to a later request of exactly
// that size. Parked buffers stay allocated as far as PyTorch can tell.
type tablePool struct {
	free  map[int64][]*block
	bytes map[int32]int64 // live tensor id -> requested bytes
	idle  int64           // bytes parked
}

// allocateTable allocates a table buffer, from the pool when one of the
// exact size is parked.
func (r *replay) allocateTable(a Alloc) int32 {
	p := r.tpool
	if p == nil {
		return r.allocate(a)
	}
	if fl := p.free[a.Bytes]; len(fl) > 0 {
		blk := fl[len(fl)-1]
		p.free[a.Bytes] = fl[:len(fl)-1]
		p.idle -= blk.size
		r.live = append(r.live, liveTensor{blk: blk, cat: a.Cat})
		r.cur[a.Cat] += blk.size
		id := int32(len(r.live) - 1)
		p.bytes[id] = a.Bytes
		r.sample()
		return id
	}
	id := r.allocate(a)
	p.bytes[id] = a.Bytes
	return id
}

// releaseTable frees a table buffer, parking it in the pool when one is set.
func (r *replay) releaseTable(id int32) {
	p := r.tpool
	if p == nil {
		r.release(id)
		return
	}
	t := &r.live[id]
	if t.blk == nil {
		return
	}
	n := p.bytes[id]
	delete(p.bytes, id)
	p.free[n] = append(p.free[n], t.blk)
	p.idle += t.blk.size
	r.cur[t.cat] -= t.blk.size
	t.blk = nil
	r.sample()
}
