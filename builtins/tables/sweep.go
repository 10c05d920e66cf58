package tables

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
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
	parallelFields = plans.LayoutKeywordNames()
	clusterFields  = []string{"nodes", "gpus_per_node", "intra", "inter", "host"}
)

func SweepBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "sweep",
		Sig:  "sweep(plan, max=10000, **axes)",
		Doc: "Simulates every combination of the axes and returns a table, one row per plan: " +
			"sweep(plan, tp=[1, 2, 4], batch=[1, 2, 4]). An axis names a train() argument (batch, seq, " +
			"precision, checkpoint, gpu, grad_accum, ...), a parallel() keyword (" + strings.Join(parallelFields, ", ") + ") or a cluster() " +
			"field (" + strings.Join(clusterFields, ", ") + "), with a list, tuple or range of values (batch=range(1, 9); a single value is a list of one). Each " +
			"combination is plan.replace(...); they run in parallel goroutines, with a progress bar on a " +
			"terminal; Ctrl-C stops them. Rows hold the axes, then fits, device_used, headroom, " +
			"peak_allocated, step_time, mfu, tokens_per_s, error (a combination the plan rejects, e.g. tp=3 " +
			"with 32 heads), plan and report. An axis of values that are not strings, numbers or bools " +
			"(optimizer=[adamw(fused=True), adamw8bit()], gpu=[gpu(\"A100-80GB\"), gpu(\"H100\")]) is shown by " +
			"their repr in print(t), as_dicts, JSON and CSV. More than max plans is an error. print(t) shows the " +
			"table; t.best() is the fastest row that fits; `memsh doc tabulate` lists every method.",
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
	plan, ok := args[0].(*plans.Plan)
	if !ok {
		return nil, fmt.Errorf("sweep: the first argument must be a plan from train() (got %s)", args[0].Type())
	}
	limit := int64(maxSweep)
	var axes []axis
	known := append(append(plans.TrainArgNames(), parallelFields...), clusterFields...)
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		if name == "max" {
			n, err := host.AsInt64(kv[1], "max")
			if err != nil {
				return nil, err
			}
			if n < 1 || n > maxSweepCeiling {
				return nil, host.WithHint(fmt.Errorf("sweep: max must be in 1..%d (got %d)", maxSweepCeiling, n),
					"a sweep holds every plan and report in memory: split larger sweeps into several")
			}
			limit = n
			continue
		}
		if !contains(known, name) {
			hint := plans.TrainAlias(name, kv[1].String()) // a trainer's name: batch_size -> batch
			if hint == "" {
				hint = host.DidYouMean(name, known)
			}
			return nil, host.WithHint(fmt.Errorf("sweep: unknown axis %q (train() arguments and parallel() or cluster() fields)", name), hint)
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
			return nil, host.WithHint(fmt.Errorf("sweep: %s make more than %d plans", axesDesc(axes), limit),
				"narrow the axes, or pass max= to allow more (each plan is a full replay)")
		}
	}

	// Build the plans on this goroutine (Starlark values), simulate them in
	// parallel, then lay out the rows.
	n := int(total)
	plans := make([]*plans.Plan, n)
	planErrs := make([]error, n)
	combo := make([]int, len(axes))
	for i := 0; i < n; i++ {
		p, err := variant(plan, thread, axes, combo)
		if err != nil {
			var se *units.Error
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
	st := host.StateOf(thread)
	reps, err := simulateAll(st, plans, planErrs, "sweep")
	if err != nil {
		return nil, err
	}

	columns := make([]string, 0, len(axes)+10)
	for _, a := range axes {
		columns = append(columns, a.name)
	}
	columns = append(columns, reports.FigureNames()...)
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
		units[j] = reports.ColumnUnit(c)
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
		var rep *reports.Report
		if reps[i] != nil {
			rep = reports.NewReport(reps[i], plans[i], st.Color)
		}
		row = append(row, reports.ReportFigures(rep)...)
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
	t := NewResultTable(fmt.Sprintf("sweep of %s: %s", axesDesc(axes), host.Count(int64(n), "plan", "plans")), columns, units, rows, nil)
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

// listOf reads an axis: a list, tuple or range of values, or one value.
func listOf(v starlark.Value) []starlark.Value {
	switch x := v.(type) {
	case *starlark.List, starlark.Tuple:
		return iterated(x.(starlark.Iterable))
	}
	if x, ok := v.(starlark.Iterable); ok && v.Type() == "range" { // range(1, 9): the ints it yields
		return iterated(x)
	}
	return []starlark.Value{v}
}

// iterated lists the values x yields.
func iterated(x starlark.Iterable) []starlark.Value {
	var out []starlark.Value
	it := x.Iterate()
	defer it.Done()
	var e starlark.Value
	for it.Next(&e) {
		out = append(out, e)
	}
	return out
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

// variant is plan.replace(...) with axis k set to its combo[k]-th value.
func variant(x *plans.Plan, thread *starlark.Thread, axes []axis, combo []int) (*plans.Plan, error) {
	a := x.Args.Clone()
	var parKw, clKw []starlark.Tuple
	for k, ax := range axes {
		v := ax.values[combo[k]]
		switch {
		case contains(parallelFields, ax.name):
			parKw = append(parKw, starlark.Tuple{starlark.String(ax.name), v})
		case contains(clusterFields, ax.name):
			clKw = append(clKw, starlark.Tuple{starlark.String(ax.name), v})
		default:
			a.Set(ax.name, v)
		}
	}
	if len(parKw) > 0 {
		p, err := replaceParallel(a.Get("parallel"), parKw)
		if err != nil {
			return nil, err
		}
		a.Set("parallel", p)
	}
	if len(clKw) > 0 {
		c, err := replaceCluster(thread, a.Get("cluster"), clKw)
		if err != nil {
			return nil, err
		}
		a.Set("cluster", c)
	}
	v, err := plans.NewPlan(a, host.CallerPos(thread))
	if err != nil {
		return nil, err
	}
	return v.(*plans.Plan), nil
}

// replaceParallel is the plan's parallel() layout with some fields
// changed, checked as parallel() checks them.
func replaceParallel(cur starlark.Value, changes []starlark.Tuple) (starlark.Value, error) {
	var p core.Parallelism
	if x, ok := cur.(plans.Parallel); ok {
		p = x.P
	}
	return plans.ReplaceLayout(p, changes)
}

// replaceCluster is the plan's cluster() with some fields changed.
func replaceCluster(thread *starlark.Thread, cur starlark.Value, changes []starlark.Tuple) (starlark.Value, error) {
	kw := []starlark.Tuple{}
	if x, ok := cur.(plans.Cluster); ok {
		c := x.C
		for _, f := range []struct {
			name string
			v    starlark.Value
		}{{"nodes", starlark.MakeInt64(c.Nodes)}, {"gpus_per_node", starlark.MakeInt64(c.GPUsPerNode)},
			{"intra", optFloat(c.IntraGBps)}, {"inter", optFloat(c.InterGBps)}, {"host", optFloat(c.HostGBps)},
			{"nvme_read", optFloat(c.NVMeReadGBps)}, {"nvme_write", optFloat(c.NVMeWriteGBps)}} {
			changed := false
			for _, ch := range changes {
				changed = changed || string(ch[0].(starlark.String)) == f.name
			}
			if !changed && f.v != starlark.None {
				kw = append(kw, starlark.Tuple{starlark.String(f.name), f.v})
			}
		}
	}
	return plans.ClusterFn(thread, starlark.NewBuiltin("cluster", nil), nil, append(kw, changes...))
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
func simulateAll(st *host.State, plans []*plans.Plan, planErrs []error, what string) ([]*replay.Report, error) {
	ctx := st.Context
	if ctx == nil {
		ctx = context.Background()
	}
	n := len(plans)
	reps := make([]*replay.Report, n)
	errs := make([]error, n)
	bar := host.NewProgress(st.Progress, what, n)
	defer bar.Finish()
	var mu sync.Mutex
	done := 0
	next := make(chan int)
	var wg sync.WaitGroup
	// The evaluations lower into lists a finished one handed back and
	// keep their copied blocks' names in one table, as a search's
	// replays do (core.BufferPool, core.NameTable): the same reports,
	// fewer bytes for the collector.
	opts := core.Options{Context: ctx, Buffers: &core.BufferPool{}, Names: &core.NameTable{}}
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				reps[i], errs[i] = sim.Evaluate(plans[i].SimPlan(), opts)
				mu.Lock()
				done++
				bar.Set(done)
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
		return nil, host.StopError(ctx, what, fmt.Sprintf(" after %d of %d plans", done, n))
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		var se *units.Error
		if !errors.As(err, &se) {
			return nil, err
		}
		planErrs[i] = err
	}
	return reps, nil
}
