package advise

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// Options tune a piece of advice.
type Options struct {
	Goal       Goal
	MaxChanges int   // changes per candidate, 1 or 2; 0 means 2
	Budget     int64 // device memory the step may use, bytes; 0 means the GPU's
	Workers    int   // parallel replays; 0 means 1
	// Progress, when set, is called after each replay with the replays
	// done and the most that may be needed.
	Progress func(done, total int)
}

// Row is one candidate, replayed in full.
type Row struct {
	Changes    []Change // one or two; none for the plan as given
	Plan       *core.Plan
	Report     *replay.Report
	Fits       bool    // fits the GPU and the budget
	Used       int64   // device memory used (nvidia-smi), bytes
	Headroom   int64   // budget - used (negative when it does not fit)
	TimeChange float64 // step time against the plan as given, a fraction (+0.33: a third slower)
	Why        string  // which terms and tensors shrink (explain.go)
	Cost       string  // which time terms grow or shrink
	// HostShort is the failure of train(host_memory=)'s check ("" when it
	// passes): Report is then the replay without the check, and the row
	// does not fit.
	HostShort string
}

// StepSeconds is the row's step time.
func (r Row) StepSeconds() float64 { return r.Report.Time.StepSeconds }

// Result is the advice on one plan.
type Result struct {
	Base       Row // the plan as given
	Budget     int64
	Goal       Goal
	MaxChanges int
	// Fits says the plan fits as given: with goal Fit there is nothing to
	// change, and Rows holds only its offload taken back (offloadDrops)
	// where that still fits and runs faster; goal Speed looks for faster
	// plans.
	Fits bool
	// Host is the failure of train(host_memory=)'s check of the plan as
	// given ("" when it passes): Base is then its replay without the
	// check, and it does not fit.
	Host string
	// Rows: the fitting candidates, best first (goal Fit: by step time;
	// goal Speed: those faster than the plan, fastest first). When none
	// fits, the candidates that came closest, by memory used.
	Rows []Row
	// Past: single changes that do not fit alone but get the step past
	// the allocation that fails now (the step then fails later, or uses
	// less), one per knob, furthest first: the steps of a longer story.
	Past   []Row
	Rescue *Rescue // when nothing fits: the smallest GPU or GPU count that would do
	Stats  Stats
}

// Stats counts what advice did.
type Stats struct {
	Singles   int // single changes replayed
	Pairs     int // pairs replayed
	HostShort int // of those replayed, the candidates that fail train(host_memory=)'s check
	Rejected  int // candidates the plan rejects (a layout that does not divide, an offload FSDP lacks)
	Replays   int // replays in all, the plan's and the rescue's included (a candidate short of host memory takes two: hostShort)
}

// AnyFits says whether some row fits.
func (r *Result) AnyFits() bool { return len(r.Rows) > 0 && r.Rows[0].Fits }

// Run advises on plan p: it replays the plan, then each single change of
// every knob, then pairs of changes to two knobs, and ranks what fits.
func Run(ctx context.Context, p *core.Plan, opts Options) (*Result, error) {
	if opts.MaxChanges == 0 {
		opts.MaxChanges = 2
	}
	if opts.MaxChanges < 1 || opts.MaxChanges > 2 {
		return nil, &units.Error{Path: "advise", Msg: fmt.Sprintf("max_changes must be 1 or 2 (got %d)", opts.MaxChanges)}
	}
	budget, err := checkBudget("advise", p, opts.Budget)
	if err != nil {
		return nil, err
	}
	rs := &replayer{ctx: ctx, workers: max(opts.Workers, 1), progress: opts.Progress, total: 1,
		opts: core.Options{Buffers: &core.BufferPool{}, Names: &core.NameTable{}}}
	base, host, err := rs.baseOrHostShort(p)
	if err != nil {
		return nil, err
	}
	res := &Result{Goal: opts.Goal, Budget: budget, MaxChanges: opts.MaxChanges, Host: host}
	res.Base = row(nil, p, base, base, budget, opts.Goal)
	if host != "" {
		res.Base.Fits, res.Base.HostShort = false, host
	}
	res.Fits = res.Base.Fits
	switch {
	case opts.Goal == Fit && res.Fits:
		err := dropsThatFit(rs, p, res)
		res.Stats.Replays = rs.replays
		return res, err
	case opts.Goal == Speed && host != "":
		return nil, &units.Error{Path: "advise", Msg: "goal=\"speed\" looks for faster plans that still fit, but this one fails the host memory check: " + host,
			Hint: "advise(plan) first: the changes that make it fit"}
	case opts.Goal == Speed && !res.Fits:
		return nil, &units.Error{Path: "advise", Msg: fmt.Sprintf("goal=\"speed\" looks for faster plans that still fit, but this one does not fit (%s used of %s)",
			units.FormatBytes(base.DeviceUsed), units.FormatBytes(budget)), Hint: "advise(plan) first: the cheapest changes that make it fit"}
	}

	var singles []Change
	for _, g := range generators {
		singles = append(singles, g.Gen(p, Ask{Goal: opts.Goal, Budget: budget, HostShort: host != ""})...)
	}
	singleRows, err := rs.run(p, wrap(singles), &res.Stats)
	if err != nil {
		return nil, err
	}
	res.Stats.Singles = len(singleRows)
	cands := make([]Row, 0, len(singleRows))
	for _, c := range singleRows {
		cands = append(cands, candidate(c, base, budget, opts.Goal))
	}
	if opts.MaxChanges >= 2 {
		pairs := pairsOf(cands, res.Base, opts.Goal)
		two, err := rs.run(p, pairs, &res.Stats)
		if err != nil {
			return nil, err
		}
		res.Stats.Pairs = len(two)
		for _, c := range two {
			cands = append(cands, candidate(c, base, budget, opts.Goal))
		}
	}
	res.Rows = rank(cands, res.Base, opts.Goal)
	if opts.Goal == Fit {
		res.Past = past(cands, res.Base)
	}
	if opts.Goal == Fit && !res.AnyFits() && host == "" { // the rescue's GPUs do not change the host's need
		if res.Rescue, err = rescue(rs, p, base, budget); err != nil {
			return nil, err
		}
	}
	res.Stats.Replays = rs.replays
	return res, nil
}

// checkBudget is the memory the step may use: the GPU's by default. A
// budget no larger than the CUDA context is refused: the device memory a
// step uses counts the context, so nothing would fit it (advise(plan,
// budget=1) took 1 as one byte, not the whole GPU, and advised from there).
func checkBudget(path string, p *core.Plan, budget int64) (int64, error) {
	capacity := p.Device.Memory
	switch {
	case budget == 0:
		return capacity, nil
	case budget < 0 || budget > capacity:
		return 0, &units.Error{Path: path, Msg: fmt.Sprintf("budget must be in (0, %s], the GPU's memory (got %d bytes)", units.FormatBytes(capacity), budget),
			Hint: "budget is the device memory the step may use: bytes (70 * GB) or a fraction of the GPU's (0.9)"}
	}
	if ctx := minContext(p.Device); budget <= ctx {
		return 0, &units.Error{Path: path, Msg: fmt.Sprintf("a budget of %s is no more than the CUDA context alone (%s on the %s): no step fits in it",
			units.FormatBytes(budget), units.FormatBytes(ctx), p.Device.Name),
			Hint: "an int budget is bytes (70 * GB); a fraction of the GPU's memory is a float (1.0 is all of it, 0.9 leaves a tenth free)"}
	}
	return budget, nil
}

// minContext is the smallest CUDA context the device's figures give (lazy
// module loading, the older or the newest stack): what any step's device
// memory holds besides the allocator's.
func minContext(d hw.Device) int64 {
	return min(d.ContextBytes(false, false), d.ContextBytes(false, true))
}

// dropsThatFit replays, for a plan that fits with goal Fit, its offload
// taken back to the GPU (offloadDrops) and keeps in res.Rows those that
// still fit and run faster, ranked and explained as goal Speed ranks and
// explains: an offload the GPU can hold costs step time for nothing.
func dropsThatFit(rs *replayer, p *core.Plan, res *Result) error {
	drops := offloadDrops(p)
	if len(drops) == 0 {
		return nil
	}
	done, err := rs.run(p, wrap(drops), &res.Stats)
	if err != nil {
		return err
	}
	res.Stats.Singles = len(done)
	cands := make([]Row, 0, len(done))
	for _, c := range done {
		cands = append(cands, candidate(c, res.Base.Report, res.Budget, Speed))
	}
	res.Rows = rank(cands, res.Base, Speed)
	return nil
}

// candidate is a replayed candidate as a row; one short of host memory
// does not fit.
func candidate(c replayed, base *replay.Report, budget int64, goal Goal) Row {
	r := row(c.changes, c.plan, c.rep, base, budget, goal)
	if c.host != "" {
		r.Fits, r.HostShort = false, c.host
	}
	return r
}

// row is a replayed candidate measured against the plan as given.
func row(changes []Change, p *core.Plan, rep, base *replay.Report, budget int64, goal Goal) Row {
	r := Row{Changes: changes, Plan: p, Report: rep, Used: rep.DeviceUsed, Headroom: budget - rep.DeviceUsed}
	r.Fits = rep.Fits && rep.DeviceUsed <= budget
	if t0 := base.Time.StepSeconds; t0 > 0 {
		if d := rep.Time.StepSeconds/t0 - 1; math.Abs(d) > 1e-9 { // the same step time summed in another order
			r.TimeChange = d
		}
	}
	if changes != nil {
		r.Why, r.Cost = explain(base, rep, goal)
	}
	return r
}

// wrap makes each change a candidate of one change.
func wrap(cs []Change) [][]Change {
	out := make([][]Change, len(cs))
	for i, c := range cs {
		out[i] = []Change{c}
	}
	return out
}

// pairsOf pairs single changes of two knobs. Goal Fit pairs the singles
// that help (less memory used, or the failing allocation gone or moved):
// a change that fits alone may still leave little headroom, which a
// second one can buy back. Goal Speed pairs a faster change with another
// faster one or with one that saves memory, so that a speed-up that does
// not fit alone can. A single short of host memory pairs only when the
// plan is too, with a change that passes the check (an offload taken back
// that needs the device memory another change saves); two short of it
// do not pair.
func pairsOf(rows []Row, base Row, goal Goal) [][]Change {
	var pool []Row
	for _, r := range rows {
		switch {
		case r.HostShort != "" && (base.HostShort == "" || goal != Fit || !helps(r, base)):
		case goal == Fit && base.HostShort != "" && r.HostShort == "":
			pool = append(pool, r) // it passes the check the plan fails
		case goal == Fit:
			if helps(r, base) {
				pool = append(pool, r)
			}
		case goal == Speed:
			if faster(r, base) || r.Used < base.Used {
				pool = append(pool, r)
			}
		}
	}
	var out [][]Change
	for i := range pool {
		for j := i + 1; j < len(pool); j++ {
			a, b := pool[i], pool[j]
			if !compatible(a.Changes[0], b.Changes[0]) || (a.HostShort != "" && b.HostShort != "") {
				continue
			}
			if goal == Speed && !faster(a, base) && !faster(b, base) {
				continue
			}
			out = append(out, []Change{a.Changes[0], b.Changes[0]})
		}
	}
	return out
}

// helps says whether a candidate moves the plan towards fitting: it uses
// less memory, or the allocation that failed no longer fails there.
func helps(r, base Row) bool {
	if r.Used < base.Used {
		return true
	}
	bo, ro := base.Report.OOM, r.Report.OOM
	if bo == nil {
		return false
	}
	return ro == nil || ro.Alloc.Tensor != bo.Alloc.Tensor || ro.Alloc.Phase != bo.Alloc.Phase
}

func faster(r, base Row) bool { return r.StepSeconds() < base.StepSeconds() }

// rank orders the candidates. The fitting ones (goal Speed: those faster
// than the plan) come by step time, then fewer changes, then less memory,
// then the order the generators made them (a smaller step of a knob
// first); step times within 0.1 % of the plan's and memory within half a
// percent of the card count as equal. Each combination of knobs keeps its
// best row only, and a pair keeps it only when it beats each of its
// changes that fits alone, in time or in memory. When none fits, the
// candidates come by memory used, closest first.
func rank(cands []Row, base Row, goal Goal) []Row {
	timeStep := max(base.StepSeconds()/1000, 1e-12)
	memStep := max(base.Report.Capacity/200, 1)
	key := func(r Row) [3]int64 {
		return [3]int64{int64(r.StepSeconds() / timeStep), int64(len(r.Changes)), r.Used / memStep}
	}
	var fit []Row
	for _, r := range cands {
		if r.Fits && (goal == Fit || faster(r, base)) {
			fit = append(fit, r)
		}
	}
	if len(fit) == 0 {
		if goal == Speed {
			return nil
		}
		var close []Row // the closest on the GPU among those the host can hold
		for _, r := range cands {
			if r.HostShort == "" {
				close = append(close, r)
			}
		}
		sort.SliceStable(close, func(i, j int) bool { return close[i].Used < close[j].Used })
		return close
	}
	sort.SliceStable(fit, func(i, j int) bool {
		a, b := key(fit[i]), key(fit[j])
		for k := range a {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return false
	})
	alone := map[string]Row{} // the fitting single change of each knob, best first
	for _, r := range fit {
		if len(r.Changes) == 1 {
			if _, ok := alone[r.Changes[0].String()]; !ok {
				alone[r.Changes[0].String()] = r
			}
		}
	}
	var out []Row
	seen := map[string]bool{}
	for _, r := range fit {
		if seen[knobs(r)] || dominated(r, alone, timeStep, memStep) {
			continue
		}
		seen[knobs(r)] = true
		out = append(out, r)
	}
	return out
}

// knobs names the knobs a row turns.
func knobs(r Row) string {
	var names []string
	for _, c := range r.Changes {
		names = append(names, c.Knob)
	}
	sort.Strings(names)
	return strings.Join(names, "+")
}

// dominated says whether a pair does no better than one of its changes
// alone that fits: not faster and not using less memory.
func dominated(r Row, alone map[string]Row, timeStep float64, memStep int64) bool {
	if len(r.Changes) < 2 {
		return false
	}
	for _, c := range r.Changes {
		a, ok := alone[c.String()]
		if ok && r.StepSeconds() > a.StepSeconds()-timeStep && r.Used > a.Used-memStep {
			return true
		}
	}
	return false
}

// past lists the single changes that do not fit but get the step past its
// failing allocation: the step fails in a later phase, one row per knob
// (its first change in the generators' order), the furthest first.
func past(cands []Row, base Row) []Row {
	bo := base.Report.OOM
	if bo == nil {
		return nil
	}
	var out []Row
	seen := map[string]bool{}
	for _, r := range cands {
		o := r.Report.OOM
		if r.Fits || len(r.Changes) != 1 || o == nil || o.Alloc.Phase <= bo.Alloc.Phase || seen[r.Changes[0].Knob] || r.HostShort != "" {
			continue
		}
		seen[r.Changes[0].Knob] = true
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Report.OOM.Alloc.Phase > out[j].Report.OOM.Alloc.Phase })
	return out
}
