package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Several consecutive steps through one allocator: the allocator lesson of
// SEEDS.md story 4. Without pad_rows a sparse table's leaves have as many
// rows as the step read distinct rows, a different count every step, so
// every step asks for tensors of new sizes.
//
// What PyTorch's caching allocator does with that (alloc/allocator.go): freed
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

// CheckSteps checks a step series against the program's sparse tables:
// each step's distinct rows per head must be possible.
func CheckSteps(prog *core.Program, rows []int64) error {
	var sparse []*tableProg
	for _, tp := range tablesOf(prog) {
		if len(tp.heads) > 0 {
			sparse = append(sparse, tp)
		}
	}
	if len(sparse) == 0 {
		return &units.Error{Path: "table_steps", Msg: "the plan has no table with grad=\"sparse\"",
			Hint: "the rows read per step change tensor sizes only for sparse tables; dense ones read the whole table"}
	}
	for i, n := range rows {
		for _, tp := range sparse {
			if n < 1 || n > tp.maxLeafRows() {
				return &units.Error{Path: "table_steps", Msg: fmt.Sprintf("rows_per_step[%d] must be in [1, %d] for table %s (got %d)", i, tp.maxLeafRows(), tp.name, n),
					Hint: "a head reads at most positions x reads per head distinct rows, and no more than its table holds"}
			}
		}
	}
	return nil
}

// RunSteps replays consecutive training steps of a lowered program
// through one allocator, one step per entry of rows (the distinct rows per
// head of the sparse tables); first is the full report of the first step.
func RunSteps(prog *core.Program, plan *core.Plan, opts core.Options, first *Report, rows []int64, pool string) (*StepsReport, error) {
	var sparse []*tableProg
	for _, tp := range tablesOf(prog) {
		if len(tp.heads) > 0 {
			sparse = append(sparse, tp)
		}
	}
	var nonTorch int64
	for _, o := range first.Overheads {
		nonTorch += o.Bytes
	}
	out := &StepsReport{Capacity: plan.Device.Memory, Pool: pool, First: first}
	var tpool *tablePool
	if pool == "exact" {
		tpool = &tablePool{free: map[int64][]*alloc.Block{}, bytes: map[int32]int64{}}
	}
	var prev *Replay
	persist := int32(0)
	for k, n := range rows {
		if err := opts.Stopped(); err != nil { // the caller's context
			return nil, err
		}
		for _, tp := range sparse {
			tp.setLeafRows(prog, n)
		}
		r := NewReplay(prog, plan, opts, plan.Device.Memory-nonTorch)
		r.tpool = tpool
		if prev == nil {
			r.setup()
			persist = r.valT[prog.Input] // everything before the batch persists (but gradients)
		} else {
			r.carry(prev, persist)
			r.setupStep()
		}
		r.forward()
		r.backward()
		if err := opts.Stopped(); err != nil {
			return nil, err
		}
		r.dropHeldBackward()
		r.optimizerStep()
		r.finish()
		res := StepResult{Step: k + 1, LeafRows: sparse[0].leafRows, PeakAllocated: r.Rep.PeakAllocated, OOM: r.Rep.OOM}
		r.endStep(persist)
		res.PeakReserved = r.Rep.PeakReserved
		if k > 0 && out.Steps[k-1].PeakReserved > res.PeakReserved {
			res.PeakReserved = out.Steps[k-1].PeakReserved
		}
		res.EndReserved = r.alloc.Reserved
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
func (tp *tableProg) setLeafRows(p *core.Program, n int64) {
	if tp.t.PadRows {
		n = tp.maxLeafRows()
	}
	tp.leafRows = n
	for _, hd := range tp.heads {
		v := &p.Values[hd.leaf]
		v.Shape = []int64{n, tp.t.Dim}
		v.Bytes = v.Dtype.Bytes(n * tp.t.Dim)
	}
}

// carry continues from the previous step's replay: the same allocator, and
// the persistent tensors (ids below persist) still live.
func (r *Replay) carry(prev *Replay, persist int32) {
	r.alloc = prev.alloc
	r.live.carry(&prev.live, persist)
	for id := range persist {
		if t := r.live.at(id); t.blk != 0 {
			r.cur[t.cat] += r.alloc.Block(t.blk).Size
		}
	}
	r.sample()
}

// setupStep is the part of setup() that each step repeats: accumulated
// gradients (with grad_accum), the batch, and the tables' rows.
func (r *Replay) setupStep() {
	r.phase = PhaseSetup
	r.generationPass() // the steady step's, after the first step (lazy_states.go)
	r.accumulatedGradients()
	r.op = "batch"
	for _, v := range r.P.BatchValues() {
		r.produce(v)
	}
	r.setupTableRows()
}

// endStep frees what the step leaves: gradients (set to None), the batch
// and anything else allocated after the persistent state.
func (r *Replay) endStep(persist int32) {
	r.phase, r.op = PhaseOptimizer, "zero_grad"
	for pi, id := range r.paramGrad {
		if id != none {
			r.release(id)
			r.paramGrad[pi] = none
		}
	}
	for id := persist; id < r.live.len(); id++ {
		r.release(id)
	}
}

// tablePool is a buffer pool keyed by exact byte size in front of the
// caching allocator, for a table's own per-step buffers: a freed buffer
// is parked under its size and handed only to a later request of exactly
// that size. Parked buffers stay allocated as far as PyTorch can tell.
type tablePool struct {
	free  map[int64][]*alloc.Block
	bytes map[int32]int64 // live tensor id -> requested bytes
	idle  int64           // bytes parked
}

// allocateTable allocates a table buffer, from the pool when one of the
// exact size is parked.
func (r *Replay) allocateTable(a Alloc) int32 {
	p := r.tpool
	if p == nil {
		return r.allocate(a)
	}
	if fl := p.free[a.Bytes]; len(fl) > 0 {
		blk := fl[len(fl)-1]
		p.free[a.Bytes] = fl[:len(fl)-1]
		p.idle -= blk.Size
		id := r.live.add(liveTensor{blk: blk.Ref(), cat: a.Cat})
		r.cur[a.Cat] += blk.Size
		p.bytes[id] = a.Bytes
		r.sample()
		return id
	}
	id := r.allocate(a)
	p.bytes[id] = a.Bytes
	return id
}

// releaseTable frees a table buffer, parking it in the pool when one is set.
func (r *Replay) releaseTable(id int32) {
	p := r.tpool
	if p == nil {
		r.release(id)
		return
	}
	t := r.live.at(id)
	if t.blk == 0 {
		return
	}
	blk := r.alloc.Block(t.blk)
	n := p.bytes[id]
	delete(p.bytes, id)
	p.free[n] = append(p.free[n], blk)
	p.idle += blk.Size
	r.cur[t.cat] -= blk.Size
	t.blk = 0
	r.sample()
}
