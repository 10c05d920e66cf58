package builtins

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/memsh/memsh/sim"
	"go.starlark.net/starlark"
)

// sweep(plan, **axes): the cross product of plan.replace(...) values,
// simulated in parallel, as a table.

// maxSweep caps a sweep's plans; sweep(max=) raises it.
const maxSweep = 10_000

// maxSweepCeiling bounds sweep(max=): each plan is a full replay whose
// report stays in memory (a few KiB each, seconds of CPU per thousand
// plans), so a million plans is already hours of work.
const maxSweepCeiling = 1_000_000

// parallelFields are the parallel() keywords a sweep axis may name;
// clusterFields the cluster() ones.
var (
	parallelFields = []string{"dp", "tp", "pp", "cp", "ep", "zero", "fsdp", "sequence_parallel", "schedule",
		"virtual_stages", "micro_batches", "distributed_optimizer"}
	clusterFields = []string{"nodes", "gpus_per_node", "intra", "inter"}
)

func sweepBuiltins() []Builtin {
	return []Builtin{{
		Name: "sweep",
		Sig:  "sweep(plan, max=10000, **axes)",
		Doc: "Simulates every combination of the axes and returns a table, one row per plan: " +
			"sweep(plan, tp=[1, 2, 4], batch=[1, 2, 4]). An axis names a train() argument (batch, seq, " +
			"precision, checkpoint, gpu, grad_accum, ...), a parallel() field (dp, tp, pp, cp, ep, zero, fsdp, " +
			"sequence_parallel, schedule, virtual_stages, micro_batches, distributed_optimizer) or a cluster() " +
			"field (nodes, gpus_per_node), with a list of values (a single value is a list of one). Each " +
			"combination is plan.replace(...); they run in parallel goroutines, with a progress bar on a " +
			"terminal; Ctrl-C stops them. Rows hold the axes, then fits, device_used, headroom, " +
			"peak_allocated, step_time, mfu, tokens_per_s, error (a combination the plan rejects, e.g. tp=3 " +
			"with 32 heads), plan and report. More than max plans is an error. The table: t.rows, t.columns, " +
			"t.best(by=\"step_time\", where=None, maximize=None), t.pareto(x, y), t.sort(by, reverse=False), " +
			"t.filter(fn), t.render(), t.as_dicts(); print(t) shows it.",
		Fn: sweepFn,
	}}
}

// axis is one swept argument.
type axis struct {
	name   string
	values []starlark.Value
}

func sweepFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("sweep takes a plan, then the axes as keywords: sweep(plan, tp=[1, 2, 4]) (got %d positional arguments)", len(args))
	}
	plan, ok := args[0].(*Plan)
	if !ok {
		return nil, fmt.Errorf("sweep: the first argument must be a plan from train() (got %s)", args[0].Type())
	}
	limit := int64(maxSweep)
	var axes []axis
	known := append(append(append([]string{}, trainArgNames[:]...), parallelFields...), clusterFields...)
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		if name == "max" {
			n, err := AsInt64(kv[1], "max")
			if err != nil {
				return nil, err
			}
			if n < 1 || n > maxSweepCeiling {
				return nil, withHint(fmt.Errorf("sweep: max must be in 1..%d (got %d)", maxSweepCeiling, n),
					"a sweep holds every plan and report in memory: split larger sweeps into several")
			}
			limit = n
			continue
		}
		if !contains(known, name) {
			return nil, withHint(fmt.Errorf("sweep: unknown axis %q (train() arguments and parallel() or cluster() fields)", name), didYouMean(name, known))
		}
		axes = append(axes, axis{name: name, values: listOf(kv[1])})
		if len(axes[len(axes)-1].values) == 0 {
			return nil, fmt.Errorf("sweep: axis %s has no values", name)
		}
	}
	total := int64(1)
	for _, a := range axes {
		n := int64(len(a.values))
		if total > limit/n { // total*n > limit, without overflowing
			total = limit + 1
		} else {
			total *= n
		}
		if total > limit {
			return nil, withHint(fmt.Errorf("sweep: %s make more than %d plans", axesDesc(axes), limit),
				"narrow the axes, or pass max= to allow more (each plan is a full replay)")
		}
	}

	// Build the plans on this goroutine (Starlark values), simulate them in
	// parallel, then lay out the rows.
	n := int(total)
	plans := make([]*Plan, n)
	planErrs := make([]error, n)
	combo := make([]int, len(axes))
	for i := 0; i < n; i++ {
		p, err := plan.variant(thread, axes, combo)
		if err != nil {
			var se *sim.Error
			if !errors.As(err, &se) {
				return nil, fmt.Errorf("sweep: %s: %v", comboDesc(axes, combo), err)
			}
			planErrs[i] = err
		}
		plans[i] = p
		for k := len(combo) - 1; k >= 0; k-- {
			combo[k]++
			if combo[k] < len(axes[k].values) {
				break
			}
			combo[k] = 0
		}
	}
	st := StateOf(thread)
	reports, err := simulateAll(st, plans, planErrs, "sweep")
	if err != nil {
		return nil, err
	}

	columns := make([]string, 0, len(axes)+10)
	for _, a := range axes {
		columns = append(columns, a.name)
	}
	figures := []string{"fits", "device_used", "headroom", "peak_allocated", "step_time", "mfu", "tokens_per_s"}
	columns = append(columns, figures...)
	anyErr := false
	for _, e := range planErrs {
		anyErr = anyErr || e != nil
	}
	if anyErr {
		columns = append(columns, "error")
	}
	columns = append(columns, "plan", "report")
	units := make([]string, len(columns))
	for j, c := range columns {
		units[j] = columnUnit(c)
	}
	rows := make([][]starlark.Value, n)
	for i := range combo {
		combo[i] = 0
	}
	for i := 0; i < n; i++ {
		row := make([]starlark.Value, 0, len(columns))
		for k, a := range axes {
			row = append(row, a.values[combo[k]])
		}
		var rep *Report
		if reports[i] != nil {
			rep = NewReport(reports[i], plans[i], st.Color)
		}
		row = append(row, reportFigures(rep)...)
		if anyErr {
			var e starlark.Value = starlark.None
			if planErrs[i] != nil {
				e = starlark.String(planErrs[i].Error())
			}
			row = append(row, e)
		}
		var pv, rv starlark.Value = starlark.None, starlark.None
		if plans[i] != nil {
			pv = plans[i]
		}
		if rep != nil {
			rv = rep
		}
		rows[i] = append(row, pv, rv)
		for k := len(combo) - 1; k >= 0; k-- {
			combo[k]++
			if combo[k] < len(axes[k].values) {
				break
			}
			combo[k] = 0
		}
	}
	t := NewResultTable(fmt.Sprintf("sweep of %s: %d plans", axesDesc(axes), n), columns, units, rows, nil)
	t.color = st.Color
	return t, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// listOf reads an axis: a list or tuple of values, or one value.
func listOf(v starlark.Value) []starlark.Value {
	switch x := v.(type) {
	case *starlark.List, starlark.Tuple:
		var out []starlark.Value
		it := starlark.Iterate(x)
		defer it.Done()
		var e starlark.Value
		for it.Next(&e) {
			out = append(out, e)
		}
		return out
	}
	return []starlark.Value{v}
}

func axesDesc(axes []axis) string {
	if len(axes) == 0 {
		return "no axes"
	}
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = fmt.Sprintf("%s (%d)", a.name, len(a.values))
	}
	return strings.Join(parts, " x ")
}

func comboDesc(axes []axis, combo []int) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = a.name + "=" + a.values[combo[i]].String()
	}
	return strings.Join(parts, ", ")
}

// columnUnit is the unit of a figure column.
func columnUnit(name string) string {
	switch name {
	case "device_used", "headroom", "peak_allocated", "peak_reserved", "capacity", "saved_activations", "host_memory":
		return UnitBytes
	case "step_time":
		return UnitSeconds
	case "mfu", "hfu":
		return UnitFraction
	}
	return ""
}

// reportFigures is the figure columns of a row: fits, device_used,
// headroom, peak_allocated, step_time, mfu, tokens_per_s (None without a
// report, time figures None without a time model).
func reportFigures(x *Report) []starlark.Value {
	if x == nil {
		return []starlark.Value{starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None}
	}
	r := x.SimReport()
	return []starlark.Value{
		starlark.Bool(r.Fits), starlark.MakeInt64(r.DeviceUsed), starlark.MakeInt64(r.Headroom),
		starlark.MakeInt64(r.PeakAllocated), x.timeFigure(r.Time.StepSeconds), x.timeFigure(r.Time.MFU),
		x.timeFigure(r.Time.TokensPerS),
	}
}

// variant is plan.replace(...) with axis k set to its combo[k]-th value.
func (x *Plan) variant(thread *starlark.Thread, axes []axis, combo []int) (*Plan, error) {
	a := x.args
	var parKw, clKw []starlark.Tuple
	for k, ax := range axes {
		v := ax.values[combo[k]]
		switch {
		case contains(parallelFields, ax.name):
			parKw = append(parKw, starlark.Tuple{starlark.String(ax.name), v})
		case contains(clusterFields, ax.name):
			clKw = append(clKw, starlark.Tuple{starlark.String(ax.name), v})
		default:
			for i, n := range trainArgNames {
				if n == ax.name {
					a.vals[i] = v
				}
			}
		}
	}
	if len(parKw) > 0 {
		p, err := replaceParallel(a.vals[argParallel], parKw)
		if err != nil {
			return nil, err
		}
		a.vals[argParallel] = p
	}
	if len(clKw) > 0 {
		c, err := replaceCluster(thread, a.vals[argCluster], clKw)
		if err != nil {
			return nil, err
		}
		a.vals[argCluster] = c
	}
	v, err := newPlan(a, CallerPos(thread))
	if err != nil {
		return nil, err
	}
	return v.(*Plan), nil
}

// replaceParallel is the plan's parallel() layout with some fields
// changed, checked as parallel() checks them.
func replaceParallel(cur starlark.Value, changes []starlark.Tuple) (starlark.Value, error) {
	var p sim.Parallelism
	if x, ok := cur.(Parallel); ok {
		p = x.p
	}
	kw := []starlark.Tuple{}
	set := func(name string, v starlark.Value) {
		for _, c := range changes {
			if string(c[0].(starlark.String)) == name {
				return
			}
		}
		kw = append(kw, starlark.Tuple{starlark.String(name), v})
	}
	ints := []struct {
		name string
		v    int64
	}{{"dp", p.DP}, {"tp", p.TP}, {"pp", p.PP}, {"cp", p.CP}, {"ep", p.EP}, {"virtual_stages", p.VirtualStages}, {"micro_batches", p.MicroBatches}}
	for _, f := range ints {
		if f.v > 0 {
			set(f.name, starlark.MakeInt64(f.v))
		}
	}
	set("zero", starlark.MakeInt(p.Zero))
	if p.FSDP {
		if p.FSDPVersion > 0 {
			set("fsdp", starlark.MakeInt(p.FSDPVersion))
		} else {
			set("fsdp", starlark.True)
		}
	}
	set("sequence_parallel", starlark.Bool(p.SequenceParallel))
	if p.Schedule != "" {
		set("schedule", starlark.String(p.Schedule))
	}
	set("distributed_optimizer", starlark.Bool(p.DistributedOptimizer))
	return parallelLayoutFn(starlark.NewBuiltin("parallel", nil), append(kw, changes...))
}

// replaceCluster is the plan's cluster() with some fields changed.
func replaceCluster(thread *starlark.Thread, cur starlark.Value, changes []starlark.Tuple) (starlark.Value, error) {
	kw := []starlark.Tuple{}
	if x, ok := cur.(Cluster); ok {
		c := x.c
		for _, f := range []struct {
			name string
			v    starlark.Value
		}{{"nodes", starlark.MakeInt64(c.Nodes)}, {"gpus_per_node", starlark.MakeInt64(c.GPUsPerNode)},
			{"intra", optFloat(c.IntraGBps)}, {"inter", optFloat(c.InterGBps)}} {
			changed := false
			for _, ch := range changes {
				changed = changed || string(ch[0].(starlark.String)) == f.name
			}
			if !changed && f.v != starlark.None {
				kw = append(kw, starlark.Tuple{starlark.String(f.name), f.v})
			}
		}
	}
	return clusterFn(thread, starlark.NewBuiltin("cluster", nil), nil, append(kw, changes...))
}

func optFloat(f float64) starlark.Value {
	if f == 0 {
		return starlark.None
	}
	return starlark.Float(f)
}

// simulateAll evaluates the plans (nil ones, which failed to build, are
// skipped) on GOMAXPROCS goroutines, polling the run's context so that
// Ctrl-C stops them, with a progress bar when the run has one and the job
// is long.
func simulateAll(st *State, plans []*Plan, planErrs []error, what string) ([]*sim.Report, error) {
	ctx := st.Context
	if ctx == nil {
		ctx = context.Background()
	}
	n := len(plans)
	reports := make([]*sim.Report, n)
	errs := make([]error, n)
	bar := newProgress(st.Progress, what, n)
	defer bar.finish()
	var mu sync.Mutex
	done := 0
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				reports[i], errs[i] = sim.Evaluate(plans[i].SimPlan(), sim.Options{Context: ctx})
				mu.Lock()
				done++
				bar.set(done)
				mu.Unlock()
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		if plans[i] == nil {
			mu.Lock()
			done++
			mu.Unlock()
			continue
		}
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, stopError(ctx, what, fmt.Sprintf(" after %d of %d plans", done, n)) // stop.go
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		var se *sim.Error
		if !errors.As(err, &se) {
			return nil, err
		}
		planErrs[i] = err
	}
	return reports, nil
}
