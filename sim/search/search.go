package search

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// Stats counts what a search did, so that a user can tell a true optimum
// from an artefact of pruning.
type Stats struct {
	Layouts   int      // layouts of the space the plan accepts
	Invalid   int      // layouts the plan rejects, or their lowering (core.LayoutError: layoutRefusals)
	InvalidBy []Reason // the rejections by rule, most first
	// Skipped are the combinations of the space's degrees that make no
	// layout (tp x cp x pp not dividing the GPUs, dp not dividing the
	// global batch, no micro-batch or stage split of the lists), by
	// cause, most first: a space with no layout says why.
	Skipped      []Reason
	PrunedStates int // model states alone exceed the GPU (a lower bound)
	PrunedMemory int // model states and activations held for backward exceed the GPU (a lower bound)
	Dominated    int // not replayed: slower than a replayed layout that fits, and needing at least its memory
	// StageDominated were not replayed in full either: slower than a
	// replayed layout that fits, one of their pipeline stages (replayed
	// in turn, the fullest by the bound first) needs at least its memory.
	StageDominated int
	Replayed       int // full replays
	// TimedByReplay are the layouts with their parameters or activations
	// on the host replayed in full to time them (the walk reuses those replays; one
	// it never reaches is not in Replayed).
	TimedByReplay int
	Fit           int // replayed layouts that fit
	// HostShort are the replayed layouts that fail train(host_memory=)'s
	// check (the node's host memory is short of what their offloads pin
	// there): they do not fit.
	HostShort int
	Profiles  int // block profiles lowered (not those whose lowering refused their layouts)
	// Priced are the profiles priced (their times summed): those with a
	// layout the memory bound keeps (search.go).
	Priced int
}

// Row is one layout of the result, replayed in full.
type Row struct {
	Plan     *core.Plan
	Report   *replay.Report
	Sharding string
	Front    bool // on the Pareto front of step time and device memory
}

// Result is the fitting layouts, fastest first, and the Pareto front.
type Result struct {
	Rows []Row // the Top fastest layouts that fit
	// Front is every layout that fits and that no other layout beats on
	// both step time and device memory of its fullest GPU (DeviceUsed),
	// fastest first; each is a full replay.
	Front []Row
	Stats Stats
}

// estimate is what Run keeps of a layout's fast estimate.
type estimate struct {
	step                 float64
	minDevice, minStates int64
	fullest              int64 // the pipeline stage of the memory bound
}

// fits says whether the memory bound keeps the layout: neither its
// model states nor its states and activations exceed capacity bytes.
func (e *estimate) fits(capacity int64) bool {
	return e.minStates <= capacity && e.minDevice <= capacity
}

// groupBy lists 0..len(of)-1 by the group of each (of[i] in 0..n-1), in
// order within a group: group g's are list[start[g]:start[g+1]].
func groupBy(n int, of []int32) (start, list []int32) {
	start = make([]int32, n+1)
	for _, g := range of {
		start[g+1]++
	}
	for g := range n {
		start[g+1] += start[g]
	}
	list = make([]int32, len(of))
	next := slices.Clone(start[:n])
	for i, g := range of {
		list[next[g]] = int32(i)
		next[g]++
	}
	return start, list
}

// Run runs the search of sp over base's model, precision, optimizer,
// sequence length and GPU. ctx cancels it.
//
// Every layout of the space is checked by the plan and estimated from
// block profiles: the step time exactly (the fast path equals the
// replay's, search_test.go) and a lower bound of the device memory.
// Layouts whose bound exceeds the GPU cannot fit and are pruned. The rest
// are walked fastest first: the Top fastest that fit are replayed, and so
// is every layout whose bound is below the memory of every faster layout
// that fits, which finds the whole Pareto front of step time and memory
// with full replays only.
func Run(ctx context.Context, base *core.Plan, sp Space) (*Result, error) {
	if err := fastPathSupported(base); err != nil {
		return nil, err
	}
	sp, err := sp.defaults(base)
	if err != nil {
		return nil, err
	}
	layouts, skipped, err := sp.enumerate(base)
	if err != nil {
		return nil, err
	}
	res := &Result{Stats: Stats{Skipped: skipped}}
	total := 2 * len(layouts)
	progress := func(done int) {
		if sp.Progress != nil {
			sp.Progress(done, total)
		}
	}

	valid, counts, err := sp.checkAll(ctx, base, layouts, progress)
	if err != nil {
		return nil, err
	}
	res.Stats.Layouts, res.Stats.Invalid, res.Stats.InvalidBy = len(valid), len(layouts)-len(valid), sortedReasons(counts)

	// Profiles, one per lowering configuration, and the units of each
	// pipeline split, in parallel.
	nb, err := sp.number(ctx, base, layouts, valid)
	if err != nil {
		return nil, err
	}
	profileAt, shapeAt, outsideAt := nb.profileAt, nb.shapeAt, nb.outsideAt
	keys, partsOf, firstOf := nb.keys, nb.partsOf, nb.firstOf
	shapeFirst, shapeProfile, outsideFirst := nb.shapeFirst, nb.shapeProfile, nb.outsideFirst
	nonTorch := make([]int64, len(outsideFirst))
	parallelFor(ctx, sp.Workers, len(outsideFirst), nil, func(oi int) {
		var p core.Plan
		sp.planInto(&p, base, layouts[outsideFirst[oi]])
		nonTorch[oi] = nonTorchBytes(&p)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Profiles, one per lowering configuration; the units of each
	// pipeline split (shapes); and the memory bounds of every layout,
	// from the shapes' activations and parameters. Each profile is lowered,
	// shaped and bounded on one worker, then priced (its times, FLOPs and
	// collectives summed from its programs) only if the bound keeps one
	// of its layouts; the programs are dropped then.
	//
	// Exact: the walk and the step times read a profile only through the
	// layouts the bound keeps (kept below: fill, stepBound, exact), and a
	// profile is priced when the bound keeps one of its layouts, by the
	// same bound and the same test (estimate.fits), so every profile they
	// read is priced. Pricing reads the profile's own programs and plan
	// alone and leaves the figures the bound read as they are (price), so
	// a profile priced after its bound holds what one priced at once
	// would. A layout of a profile left unpriced is pruned: its bound
	// exceeds the GPU, and the bound is a lower bound of what its replay
	// reports (TestSearchFastPathEqualsReplay), so it cannot fit, nor be
	// a row or on the front, which hold replayed layouts that fit. The
	// result is the same with every profile priced
	// (TestSearchPricesKeptProfilesOnly).
	shapeStart, shapeList := groupBy(len(keys), shapeProfile)
	layoutStart, layoutList := groupBy(len(keys), profileAt)
	prs := make([]*profile, len(keys))
	errs := make([]error, len(keys))
	shs := make([]*stageShape, nb.shapes)
	serrs := make([]error, nb.shapes)
	ests := make([]estimate, len(valid))
	capacity := base.Device.Memory
	// Every lowering of the run keeps its copied blocks' names in one
	// table (core.NameTable): profiles and replays name the same blocks.
	names, pool := &core.NameTable{}, &core.BufferPool{} // and its replays, the lists they lowered into
	lows := make([]*lowering, max(sp.Workers, 1))        // each worker's lowering lists
	splits := &splitTable{}                              // the pipeline splits the shapes share
	for w := range lows {
		lows[w] = newLowering(names)
	}
	parallelForOn(ctx, sp.Workers, len(keys), func(done int) { progress(len(layouts) + int(layoutStart[done])) }, func(w, i int) {
		lw := lows[w]
		defer lw.release()
		pr, err := newProfileIn(firstOf[i], partsOf[i], lw)
		if err != nil {
			errs[i] = err
			return
		}
		prs[i] = pr
		for _, si := range shapeList[shapeStart[i]:shapeStart[i+1]] {
			var p core.Plan
			sp.planInto(&p, base, layouts[shapeFirst[si]])
			if shs[si], serrs[si] = pr.shapeIn(p.Parallel, splits); serrs[si] != nil && layoutRefusal(serrs[si]) == nil {
				return
			}
		}
		price := sp.priceAll
		for _, j := range layoutList[layoutStart[i]:layoutStart[i+1]] {
			if serrs[shapeAt[j]] != nil { // its shape's lowering refused the layout (layoutRefusals)
				continue
			}
			var p core.Plan
			sp.planInto(&p, base, layouts[valid[j]])
			fe := pr.bound(&p, shs[shapeAt[j]], nonTorch[outsideAt[j]])
			ests[j] = estimate{minDevice: fe.minDevice, minStates: fe.minStates, fullest: fe.fullest}
			price = price || ests[j].fits(capacity)
		}
		if !price {
			return
		}
		pr.price(lw)
		// The compute of the stages of each shape a kept layout has: the
		// walk's lower bounds of the step times (stepBound).
		for _, j := range layoutList[layoutStart[i]:layoutStart[i+1]] {
			if serrs[shapeAt[j]] == nil && ests[j].fits(capacity) {
				shs[shapeAt[j]].fillCompute(pr)
			}
		}
	})
	lows = nil
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A lowering's refusal of a layout rejects the layouts it lowered
	// for, as the plan's refusals do; any other error fails the search.
	refused, n, err := layoutRefusals(errs, serrs, profileAt, shapeAt, counts)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		res.Stats.Layouts, res.Stats.Invalid, res.Stats.InvalidBy = res.Stats.Layouts-n, res.Stats.Invalid+n, sortedReasons(counts)
	}
	for _, pr := range prs {
		if pr != nil {
			res.Stats.Profiles++
			if pr.priced {
				res.Stats.Priced++
			}
		}
	}
	shapeOf := func(j int) *stageShape { return shs[shapeAt[j]] }
	profileOf := func(j int) *profile { return prs[profileAt[j]] }
	var kept []int // indexes into valid
	for j, e := range ests {
		switch {
		case refused != nil && refused[j]:
		case e.minStates > capacity:
			res.Stats.PrunedStates++
		case e.minDevice > capacity:
			res.Stats.PrunedMemory++
		default: // e.fits(capacity)
			kept = append(kept, j)
		}
	}

	// The lower bounds of the step times of the layouts the bounds keep
	// read their shapes' stages' compute, summed once a shape above. The
	// stages' other figures and lists, which the step time reads, are
	// summed only for a shape a layout of which the walk times (exact,
	// fillShared): in the 70B search, 3,165 of the 6,986 shapes of kept
	// layouts.
	for _, j := range kept {
		if !profileOf(j).priced || shapeOf(j).compute == nil { // never: the bound that kept j priced its profile and summed its shape's compute
			return nil, fmt.Errorf("internal error: a layout the memory bound keeps has its profile unpriced")
		}
	}
	rooms := &sync.Pool{New: func() any { return &stageRoom{} }} // where fillShared sums the stages
	// The walk takes the layouts fastest first. It knows a lower bound of
	// each step time (the slowest stage's compute) and times a layout in
	// full only when it comes up by its bound and its memory bound does
	// not show it dominated there (walk.has).
	// A layout with its parameters or activations on the host is timed
	// by its replay (timedByItsReplay), so the time the walk orders it by
	// is the replay's.
	// Its report is kept (timedReplays, by index into valid) for the
	// walk, which would replay it again.
	var replayErr error
	var replayErrOnce sync.Once
	var timedReplays sync.Map
	var timedByReplay atomic.Int64
	hosts := &hostChecks{}
	exact := func(j int) float64 {
		l := layouts[valid[j]]
		var p core.Plan
		sp.planInto(&p, base, l)
		if timedByItsReplay(&p, l) {
			opts := core.Options{Context: ctx, Names: names, Buffers: pool}
			r, err := hosts.evaluate(&p, opts, func(q *core.Plan) (*replay.Report, error) { return sim.Evaluate(q, opts) })
			if err != nil {
				replayErrOnce.Do(func() { replayErr = err })
				return math.Inf(1)
			}
			timedReplays.Store(j, r)
			timedByReplay.Add(1)
			return r.Time.StepSeconds
		}
		pr, sh := profileOf(j), shapeOf(j)
		sh.fillShared(pr, rooms)
		return pr.stepSeconds(&p, sh)
	}
	queue := make(stepQueue, len(kept))
	forKept := parallelForCheap // a bound each
	if sp.eager {
		forKept = parallelFor // a step time each, some of them replays
	}
	forKept(ctx, sp.Workers, len(kept), nil, func(i int) {
		j := kept[i]
		if sp.eager {
			ests[j].step = exact(j)
			queue[i] = stepEntry{step: ests[j].step, exact: true, minDevice: ests[j].minDevice, j: j}
			return
		}
		l := layouts[valid[j]]
		var p core.Plan
		sp.planInto(&p, base, l)
		queue[i] = stepEntry{step: profileOf(j).stepBound(&p, shapeOf(j), !timedByItsReplay(&p, l)), minDevice: ests[j].minDevice, j: j}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	heap.Init(&queue)
	w := &walk{ctx: ctx, names: names, pool: pool, sp: sp, base: base, layouts: layouts, valid: valid, queue: &queue, total: len(kept),
		exact: exact, ests: ests, reports: map[int]*replay.Report{}, stats: &res.Stats, hosts: hosts,
		timedReport: func(j int) *replay.Report {
			if r, ok := timedReplays.Load(j); ok {
				return r.(*replay.Report)
			}
			return nil
		}}
	if err := w.top(res); err != nil {
		return nil, err
	}
	if err := w.front(res); err != nil {
		return nil, err
	}
	if replayErr != nil {
		return nil, replayErr
	}
	res.Stats.TimedByReplay = int(timedByReplay.Load())
	return res, nil
}

// timedByItsReplay says whether layout l (plan p) is timed by a full
// replay rather than its profile: with its parameters on the host or its
// optimizer on NVMe (offloadKind.timedByReplay) or its activations on
// the host (their copies to and from the host,
// replay/offload_timeline.go). The walk still reaches it by the lower
// bound of its compute (stepBound): an offload adds copies, swaps and
// waits to the step, never compute, so the bound stays below the replay.
func timedByItsReplay(p *core.Plan, l layout) bool {
	return l.offload.timedByReplay() || (p.Offload != nil && p.Offload.Activations != "")
}

// fastPathSupported refuses plans whose features the block profiles do not
// sum exactly or whose memory bound they do not keep below the replay
// (search is for layouts of training steps); every setting it accepts is
// carried into every layout (space_base.go) and covered by
// TestSearchFastPathEqualsReplay.
func fastPathSupported(p *core.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	sweep := "sweep(plan, ...) evaluates any plan"
	refuse := func(what string) error {
		return &units.Error{Path: "search", Msg: "a plan with " + what + " is not supported", Hint: sweep}
	}
	switch {
	case p.Phase == core.Eval:
		return &units.Error{Path: "search", Msg: "search ranks training steps (phase=\"eval\" given)"}
	case p.Members > 1 || p.TokensPerBatch > 0:
		return refuse("members or tokens_per_batch")
	case p.Float8.ParamGather:
		// TE's fp8 primary weights hold 1 B an element and the distributed
		// optimizer gathers them in fp8: neither the bound's parameters nor
		// the fast path's data-parallel collectives count them so.
		return refuse("fp8_param_gather")
	case p.FirstStep || p.Validation || p.Rollout > 1:
		return refuse("first_step, validation or rollout")
	case p.Images.Count > 0 || p.Videos.Count > 0: // a vision-language step: no fast-path test holds one
		return refuse("images or videos")
	case len(p.Parallel.FSDPUnits) > 0:
		return refuse("fsdp_units")
	case p.Preference != nil:
		// DPO's reference forward and two rows a pair (KTO's KL
		// forwards): no block profile sums them, and their layouts are
		// data parallelism alone.
		switch {
		case p.Preference.KTO():
			return refuse("preference (kto)")
		case p.Preference.GRPO():
			return refuse("preference (grpo)")
		}
		return refuse("preference (dpo)")
	case len(p.Trainable) > 0:
		return refuse("trainable patterns") // the profiles' blocks train alike; patterns single layers out
	case p.Optimizer.Kind == core.Muon:
		// Muon steps each matrix with Newton-Schulz products (and under
		// Megatron gathers its TP shards, or owns whole matrices by rank:
		// core/muon_megatron.go): the profiles sum its traffic as AdamW's.
		return refuse("muon()")
	}
	if err := checkBase(p); err != nil {
		return err
	}
	var tables bool
	for _, l := range p.Model.Layers {
		core.Walk(l, core.ChildPath("", nil, l), func(_ string, l core.Layer) {
			if _, ok := l.(*replay.Table); ok {
				tables = true
			}
		})
	}
	if tables {
		return &units.Error{Path: "search", Msg: "search does not take models with table() layers", Hint: "sweep(plan, ...) evaluates any plan"}
	}
	return nil
}

// parallelFor runs fn(0..n-1) on workers goroutines; it stops handing
// out work when ctx is done. progress, when set, is called from the
// calling goroutine with the items handed out, every 1,024 and at the end.
func parallelFor(ctx context.Context, workers, n int, progress func(done int), fn func(i int)) {
	parallelForOn(ctx, workers, n, progress, func(_, i int) { fn(i) })
}

// parallelForOn is parallelFor that tells fn which of the workers
// (0..workers-1) runs it: state kept per worker (a worker's lowering
// lists) is fn's to use without locks.
func parallelForOn(ctx context.Context, workers, n int, progress func(done int), fn func(worker, i int)) {
	parallelChunks(ctx, workers, n, 1, progress, fn)
}

// parallelForCheap is parallelFor for items of a microsecond or two
// (a layout's check, its profile key, its bound): the workers take
// cheapChunk items at a time, so that the hand-out, a channel send and
// receive and often a goroutine's wake-up per item, does not cost as
// much as the items (the 70B search's checks of its 112,880 layouts
// kept 1.4 of 2 cores busy one item at a time).
func parallelForCheap(ctx context.Context, workers, n int, progress func(done int), fn func(i int)) {
	parallelChunks(ctx, workers, n, cheapChunk, progress, func(_, i int) { fn(i) })
}

// cheapChunk is how many items parallelForCheap hands out at a time; it
// divides 1,024, so progress is called at the same counts as one item at
// a time.
const cheapChunk = 64

// parallelChunks runs fn(0..n-1) on workers goroutines, handing them
// chunk items at a time in order; it stops handing out work when ctx is
// done. progress, when set, is called from the calling goroutine with
// the items handed out, every 1,024 and at the end (chunk divides 1,024).
func parallelChunks(ctx context.Context, workers, n, chunk int, progress func(done int), fn func(worker, i int)) {
	tick := func(i int) {
		if progress != nil && (i%1024 == 0 || i == n) {
			progress(i)
		}
	}
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			if ctx.Err() != nil {
				return
			}
			fn(0, i)
			tick(i + 1)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int, 64) // the first item of a chunk
	for w := range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := range next {
				for i := lo; i < min(lo+chunk, n); i++ {
					fn(w, i)
				}
			}
		}()
	}
	for lo := 0; lo < n; lo += chunk {
		if ctx.Err() != nil {
			break
		}
		next <- lo
		tick(min(lo+chunk, n))
	}
	close(next)
	wg.Wait()
}
