package advise

import (
	"context"
	"fmt"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// The largest micro-batch or sequence length that fits, by replay: the
// value doubles until a step does not fit, then bisection between the
// last that fits and the first that does not. About 2 log2(answer)
// replays. The allocated bytes grow with the value (activations and their
// gradients grow with both); the reserve mostly does, but the caching
// allocator's fragmentation can make a larger value reserve less
// (sim.TestReservedDipsWithSeq), so near the limit a value past the
// boundary found can fit again. The tests check that on random plans the
// boundary is the one a scan finds.

// Caps on the values tried: a micro-batch of a million sequences, a
// sequence of four million tokens. At the caps, Limit.Capped is set.
const (
	maxBatchValue = 1 << 20
	maxSeqValue   = 1 << 22
)

// Limit is the largest value of a plan's micro-batch or sequence length
// that fits.
type Limit struct {
	Keyword string     // "batch" or "seq"
	Value   int64      // the largest that fits; 0 when even the smallest does not
	Plan    *core.Plan // the plan at Value (at the smallest value when Value is 0)
	Report  *replay.Report
	// Next is the first value up that does not fit, and its replay: its
	// OOM names the tensor that fails. NextErr is the plan's refusal of
	// Next when the plan rejects it (a sequence past the model's
	// positions); both are unset when Capped.
	Next       int64
	NextReport *replay.Report
	NextErr    error
	Capped     bool // Value is the cap: more may fit
	Replays    int
}

// MaxBatch is the largest micro-batch of p that fits budget (0: the GPU's
// memory), grad_accum and everything else as they are.
func MaxBatch(ctx context.Context, p *core.Plan, budget int64) (*Limit, error) {
	return search(ctx, p, budget, "batch", 1, maxBatchValue, func(q *core.Plan, v int64) { q.Batch = v })
}

// MaxSeq is the longest sequence of p that fits budget, in steps the
// layout allows (a multiple of cp, and of tp with sequence parallelism).
func MaxSeq(ctx context.Context, p *core.Plan, budget int64) (*Limit, error) {
	switch {
	case p.Model != nil && p.Model.Points > 0:
		return nil, &units.Error{Path: "max_seq", Msg: fmt.Sprintf("graph model %q has no sequence length: its rows are its %d grid points", p.Model.Name, p.Model.Points),
			Hint: "max_batch(plan) finds the largest batch"}
	case p.Model != nil && !p.Model.TakesTokens() && p.Seq <= 1:
		return nil, &units.Error{Path: "max_seq", Msg: fmt.Sprintf("model %q reads no sequences (seq is unset)", p.Model.Name)}
	case p.TokensPerBatch > 0:
		return nil, &units.Error{Path: "max_seq", Msg: "the plan packs sequences into tokens_per_batch: the row length is tokens_per_batch, not seq",
			Hint: "replace(tokens_per_batch=...) sweeps the packed row"}
	}
	par := p.Parallel.Norm()
	step := par.CP
	if par.SequenceParallel {
		step *= par.TP
	}
	return search(ctx, p, budget, "seq", step, maxSeqValue, func(q *core.Plan, v int64) { q.Seq = v })
}

// search finds the largest multiple of step up to limit at which p, with
// set(v) applied, fits budget.
func search(ctx context.Context, p *core.Plan, budget int64, keyword string, step, limit int64, set func(*core.Plan, int64)) (*Limit, error) {
	budget, err := checkBudget("max_"+keyword, p, budget)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	lim := &Limit{Keyword: keyword}
	// The probes lower into lists the last one handed back, names kept in
	// one table (core.BufferPool, core.NameTable): the same reports,
	// fewer bytes for the collector.
	opts := core.Options{Buffers: &core.BufferPool{}, Names: &core.NameTable{}}
	type probe struct {
		plan *core.Plan
		rep  *replay.Report
		err  error
		fits bool
	}
	try := func(k int64) (probe, error) {
		if err := ctx.Err(); err != nil {
			return probe{}, err
		}
		q := *p
		set(&q, k*step)
		lim.Replays++
		rep, err := sim.Evaluate(&q, opts)
		switch {
		case err != nil && rejected(err):
			return probe{plan: &q, err: err}, nil
		case err != nil:
			return probe{}, err
		}
		return probe{plan: &q, rep: rep, fits: rep.Fits && rep.DeviceUsed <= budget}, nil
	}
	maxK := limit / step
	first, err := try(1)
	if err != nil {
		return nil, err
	}
	if !first.fits {
		if first.err != nil {
			return nil, first.err // the smallest value is refused: say why
		}
		lim.Plan, lim.Report, lim.Next, lim.NextReport = first.plan, first.rep, step, first.rep
		return lim, nil
	}
	lo, good := int64(1), first
	var hi int64
	var bad probe
	for k := int64(2); ; k *= 2 {
		if k > maxK {
			k = maxK
		}
		if k <= lo {
			break
		}
		pr, err := try(k)
		if err != nil {
			return nil, err
		}
		if !pr.fits {
			hi, bad = k, pr
			break
		}
		lo, good = k, pr
	}
	if hi == 0 { // fits at the cap
		lim.Value, lim.Plan, lim.Report, lim.Capped = lo*step, good.plan, good.rep, true
		return lim, nil
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		pr, err := try(mid)
		if err != nil {
			return nil, err
		}
		if pr.fits {
			lo, good = mid, pr
		} else {
			hi, bad = mid, pr
		}
	}
	lim.Value, lim.Plan, lim.Report = lo*step, good.plan, good.rep
	lim.Next, lim.NextReport, lim.NextErr = hi*step, bad.rep, bad.err
	return lim, nil
}
