package tables

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/sim/advise"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// advise(plan, goal="fit", budget=None, max_changes=2, top=10): the
// cheapest changes that make a plan fit (sim/advise), as a table.

// AdviseColumns are the columns of advise()'s table.
var AdviseColumns = []string{"change", "fits", "device_used", "headroom", "step_time", "time_change", "tokens_per_s", "why", "cost", "plan", "report"}

func AdviseBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "advise",
		Sig:  "advise(plan, goal=\"fit\", budget=None, max_changes=2, top=10, keys=None)",
		Doc: "What to change so that plan fits, and what it costs: advise(plan). It replays every change a user can make " +
			"without changing the model (micro-batch with gradient accumulation, checkpointing (torchtitan's per-op policy " +
			"included), torch.compile, precision, PEFT's adapters in the model's dtype (lora(autocast_adapter_dtype=False)), the optimizer, loss " +
			"chunks, ZeRO/FSDP sharding with several GPUs, offload, expandable segments, an ensemble's members one at a time, a " +
			"graph model's chunks, a sparse table's placement, tensor or pipeline layouts of the same GPUs (the global batch kept), " +
			"a pipeline's schedule, context parallelism by ring or Ulysses, a MoE's expert_tp, a GRPO step's colocated vLLM engine asleep between generations, and checkpoint(budget=...): the " +
			"least recompute that fits), one at a time, then " +
			"pairs of changes to two knobs (max_changes=1: singles only). Every candidate is a full replay, never a formula. The " +
			"fitting ones come ranked by step time, one row per combination of knobs (a pair only when it beats its changes " +
			"alone), with columns change (the train() keywords to write), fits, device_used, headroom, step_time, time_change " +
			"(against the plan as given, a fraction), tokens_per_s, why (which terms of the memory at the peak, saved " +
			"activations or largest allocation shrink), cost (which time terms grow), plan (simulate() or replace() it) and report. " +
			"goal=\"speed\" takes a plan that fits and lists faster plans that still fit. budget is the device memory the step " +
			"may use: bytes (70 * GB; a float of a MiB or more is bytes too, rounded down: 0.9 * simulate(plan).device_used; " +
			"more than the CUDA context, so budget=1 is refused) or a fraction of the GPU's (0.9, a float: 1.0 is all of it); " +
			"the default is all of it, and under a smaller budget the title's verdict, fits and headroom are against the budget. top limits the rows " +
			"(None: all). The notes say when the plan fits already, which changes get past the failing allocation without " +
			"fitting (a later failure), and, when nothing fits, the smallest GPU of the catalog (when the plan's own does not hold it) and the fewest " +
			"GPUs (FSDP) that would hold the plan as it is. A plan that fails train(host_memory=)'s check is advised from its replay " +
			"without the check (the title says what the host lacks): every candidate is checked against host_memory (one that " +
			"falls short does not fit, and the notes count them), the offload knob takes the offload back to the GPU (offload=None, " +
			"or one tier of it), and at zero=3 it also offers ZeRO-Infinity's NVMe tier for the optimizer state, the parameters " +
			"or both (offload(optimizer=\"nvme\")), at the cluster's NVMe rates. A plan that offloads and fits gets its offload " +
			"taken back as rows when that still fits and runs faster (goal=\"speed\" ranks it with the other faster plans). " +
			"keys (a dict of train() keyword to a trainer config's key: memsh check passes the keys its importer read) adds a column config after change: " +
			"each setting as \"key: value\" in the config's own keys (per_device_train_batch_size: 4, gradient_checkpointing: true), " +
			"or, where no key of the config says it, the keyword marked \"(no key in the config)\". " +
			"A progress bar shows on a terminal; Ctrl-C stops it.",
		Fn: adviseFn,
	}}
}

func adviseFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pv, budget, top, keysV starlark.Value = nil, starlark.None, starlark.MakeInt(10), starlark.None
	goal := "fit"
	maxChanges := 2
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "plan", &pv, "goal?", &goal, "budget?", &budget, "max_changes?", &maxChanges, "top?", &top, "keys?", &keysV); err != nil {
		return nil, err
	}
	keys, err := adviseKeys(keysV)
	if err != nil {
		return nil, err
	}
	plan, ok := pv.(*plans.Plan)
	if !ok {
		return nil, fmt.Errorf("advise: plan must be a plan from train() (got %s)", pv.Type())
	}
	opts := advise.Options{MaxChanges: maxChanges, Workers: runtime.GOMAXPROCS(0)}
	switch goal {
	case "fit":
		opts.Goal = advise.Fit
	case "speed":
		opts.Goal = advise.Speed
	default:
		return nil, host.WithHint(fmt.Errorf("advise: unknown goal %q (known: fit, speed)", goal), host.DidYouMean(goal, []string{"fit", "speed"}))
	}
	if maxChanges < 1 || maxChanges > 2 {
		return nil, fmt.Errorf("advise: max_changes must be 1 or 2 (got %d)", maxChanges)
	}
	if opts.Budget, err = budgetBytes(budget, plan); err != nil {
		return nil, err
	}
	limit, err := topRows(top)
	if err != nil {
		return nil, err
	}
	st := host.StateOf(thread)
	ctx := st.Context
	if ctx == nil {
		ctx = context.Background()
	}
	bar := host.NewProgress(st.Progress, "advise", 0)
	opts.Progress = func(done, total int) {
		bar.SetTotal(total)
		bar.Set(done)
	}
	res, err := advise.Run(ctx, plan.SimPlan(), opts)
	bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, host.StopError(ctx, "advise", "")
		}
		return nil, host.WithOrigin(err, plan.Decl())
	}
	return adviceTable(res, plan, host.CallerPos(thread), limit, keys, st.Color)
}

// budgetBytes reads advise()'s budget: None (the GPU's memory), bytes, or
// a fraction of the GPU's memory. A float of a MiB or more is bytes too
// (rounded down): 0.9 * simulate(plan).device_used is a float. A float
// between 1 and a MiB (1.5) is neither: refused.
func budgetBytes(v starlark.Value, plan *plans.Plan) (int64, error) {
	capacity := plan.SimPlan().Device.Memory
	switch x := v.(type) {
	case starlark.NoneType:
		return 0, nil
	case starlark.Float:
		switch f := float64(x); {
		case f > 0 && f <= 1:
			return int64(f * float64(capacity)), nil
		case f >= 1<<20 && f <= float64(capacity):
			return int64(f), nil
		}
	case starlark.Int:
		n, ok := x.Int64()
		if ok && n > 0 && n <= capacity {
			return n, nil
		}
	default:
		return 0, fmt.Errorf("budget must be None, bytes or a fraction of the GPU's memory (got %s)", v.Type())
	}
	return 0, host.WithHint(fmt.Errorf("budget must be a fraction in (0, 1] or bytes up to the GPU's %s (got %s)", units.FormatBytes(capacity), v),
		"budget is the device memory the step may use: budget = 0.9 leaves a tenth of the card free")
}

// topRows reads top: None (every row) or a positive count.
func topRows(v starlark.Value) (int, error) {
	if v == starlark.None {
		return 0, nil
	}
	n, err := host.AsInt64(v, "top")
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("top must be at least 1, or None for every row (got %d)", n)
	}
	return int(min(n, 1<<30)), nil
}

// adviceTable lays out the advice: one row per candidate, the notes under
// the table.
func adviceTable(res *advise.Result, plan *plans.Plan, decl syntax.Position, top int, keys map[string]string, color bool) (*ResultTable, error) {
	columns := AdviseColumns
	if keys != nil { // config after change
		columns = append([]string{columns[0], "config"}, columns[1:]...)
	}
	units := make([]string, len(columns))
	for j, c := range columns {
		units[j] = reports.ColumnUnit(c)
	}
	units[columnOf(columns, "time_change")] = host.UnitFraction
	rows := res.Rows
	if top > 0 && len(rows) > top {
		rows = rows[:top]
	}
	cells := make([][]starlark.Value, 0, len(rows))
	for _, r := range rows {
		row, err := adviceRow(r, plan, decl, color)
		if err != nil {
			return nil, err
		}
		if keys != nil {
			row = append([]starlark.Value{row[0], starlark.String(configText(r, keys))}, row[1:]...)
		}
		cells = append(cells, row)
	}
	base := reports.NewReport(res.Base.Report, plan, color)
	verdict, _ := base.Attr("summary")
	v := strings.TrimSuffix(string(verdict.(starlark.String)), ".")
	if res.Host != "" { // the GPU may hold it; the node's RAM does not
		v = "does not fit in host memory: " + res.Host
	} else if v2, ok := budgetVerdict(res, plan.SimPlan().Device.Memory); ok {
		v = v2
	}
	title := fmt.Sprintf("advise: %s on %s: %s; %s", plan.SimPlan().Model.Name, plan.SimPlan().Device.Name, plan.Summary(), v)
	if res.Goal == advise.Speed {
		title = "advise (goal=\"speed\"): " + strings.TrimPrefix(title, "advise: ")
	}
	notes, err := adviceNotes(res, plan, decl, len(rows), color)
	if err != nil {
		return nil, err
	}
	t := NewResultTable(title, columns, units, cells, notes)
	t.color = color
	return t, nil
}

// budgetVerdict is the title's verdict on a plan its GPU holds under a
// budget below the GPU's memory: against the budget, as the rows' fits
// and headroom are (the report's own verdict said "fits" with the GPU's
// headroom over a budget the plan exceeded).
func budgetVerdict(res *advise.Result, capacity int64) (string, bool) {
	b := res.Base
	if res.Budget >= capacity || !b.Report.Fits {
		return "", false
	}
	if b.Fits {
		return fmt.Sprintf("fits the budget: %s of %s used, %s headroom", units.FormatBytes(b.Used), units.FormatBytes(res.Budget), units.FormatBytes(b.Headroom)), true
	}
	return fmt.Sprintf("over the budget: %s used of %s (the GPU's %s holds it)", units.FormatBytes(b.Used), units.FormatBytes(res.Budget), units.FormatBytes(capacity)), true
}

// adviceRow is one row of the table; its plan is built by train()'s own
// setters from the keywords the change writes.
func adviceRow(r advise.Row, base *plans.Plan, decl syntax.Position, color bool) ([]starlark.Value, error) {
	p, text, err := changedPlan(r, base, decl)
	if err != nil {
		return nil, err
	}
	rep := reports.NewReport(r.Report, p, color)
	tm := r.Report.Time
	return []starlark.Value{
		starlark.String(text), starlark.Bool(r.Fits), starlark.MakeInt64(r.Used), starlark.MakeInt64(r.Headroom),
		rep.TimeFigure(tm.StepSeconds), rep.TimeFigure(r.TimeChange), rep.TimeFigure(tm.TokensPerS),
		starlark.String(r.Why), starlark.String(r.Cost), p, rep,
	}, nil
}

// changedPlan is the plan as given with a row's changes, through train()'s
// setters (what a user gets writing the keywords), and the keywords as
// text.
func changedPlan(r advise.Row, base *plans.Plan, decl syntax.Position) (*plans.Plan, string, error) {
	a := base.Args.Clone()
	var texts []string
	model := false
	for _, c := range r.Changes {
		for _, s := range c.Settings {
			if m, ok := s.Value.(advise.ModelChange); ok {
				model = true
				texts = append(texts, m.Text)
				continue
			}
			v, err := plans.EngineValue(s.Value)
			if o, ok := s.Value.(core.Offload); ok && o == (core.Offload{}) {
				v, err = starlark.None, nil // every tier taken back (advise.Setting)
			}
			if err != nil {
				return nil, "", err
			}
			a.Set(s.Keyword, v)
			texts = append(texts, plans.KeywordText(s.Keyword, v))
		}
	}
	if model { // settings of the model's layers: the engine's edited copy
		a.Set("model", models.NewModel(r.Plan.Model, nil, base.Model().Decl()))
	}
	pv, err := plans.NewPlan(a, decl)
	if err != nil {
		return nil, "", fmt.Errorf("internal error: advise row %s: %v", strings.Join(texts, ", "), err)
	}
	return pv.(*plans.Plan), strings.Join(texts, ", "), nil
}

// adviceNotes say what the table leaves out: the plan fits already, which
// changes get past its failure, the smallest GPU and GPU count when
// nothing fits, and how many candidates were replayed.
func adviceNotes(res *advise.Result, plan *plans.Plan, decl syntax.Position, shown int, color bool) ([]string, error) {
	var notes []string
	used := func(r advise.Row) string {
		return fmt.Sprintf("%s of %s used", units.FormatBytes(r.Used), units.FormatBytes(r.Report.Capacity))
	}
	baseUsed := used(res.Base) // against the budget where one is below the GPU's memory, as its headroom is
	if res.Budget < plan.SimPlan().Device.Memory {
		baseUsed = fmt.Sprintf("%s of the %s budget used", units.FormatBytes(res.Base.Used), units.FormatBytes(res.Budget))
	}
	switch {
	case res.Goal == advise.Fit && res.Fits && len(res.Rows) > 0:
		notes = append(notes, fmt.Sprintf("the plan fits as it is: %s, %s headroom; the rows take its offload back to the GPU, still fit and run faster; "+
			"advise(plan, goal=\"speed\") looks for other faster plans that still fit", baseUsed, units.FormatBytes(res.Base.Headroom)))
	case res.Goal == advise.Fit && res.Fits:
		notes = append(notes, fmt.Sprintf("the plan fits as it is: %s, %s headroom; advise(plan, goal=\"speed\") looks for faster plans that still fit",
			baseUsed, units.FormatBytes(res.Base.Headroom)))
	case res.Goal == advise.Speed && len(res.Rows) == 0:
		notes = append(notes, "no change makes the plan faster and still fit")
	case !res.AnyFits() && len(res.Rows) > 0:
		notes = append(notes, fmt.Sprintf("no change fits (max_changes=%d); the closest come first", res.MaxChanges))
	case !res.AnyFits() && res.Host != "":
		notes = append(notes, fmt.Sprintf("no change fits (max_changes=%d): each one the plan takes falls short of host_memory too", res.MaxChanges))
	case !res.AnyFits():
		notes = append(notes, fmt.Sprintf("no change fits (max_changes=%d): the plan rejects each one", res.MaxChanges))
	}
	for _, r := range res.Past {
		text, err := rowText(r, plan, decl)
		if err != nil {
			return nil, err
		}
		o := res.Base.Report.OOM.Alloc
		notes = append(notes, fmt.Sprintf("%s gets past the failure in %s (%s) but does not fit, %s needed: %s",
			text, o.Phase, o.Tensor, units.FormatBytes(r.Used), r.Why))
	}
	if rs := res.Rescue; rs != nil {
		if r := rs.GPU; r != nil {
			notes = append(notes, fmt.Sprintf("the plan as it is fits on a %s: %s", r.Plan.Device.Name, used(*r)))
		}
		if r := rs.GPUs; r != nil {
			text, err := rowText(*r, plan, decl)
			if err != nil {
				return nil, err
			}
			notes = append(notes, fmt.Sprintf("the plan fits on %d GPUs with %s: %s each", r.Plan.Parallel.Norm().GPUs(), text, used(*r)))
		}
		notes = append(notes, rs.Notes...)
	}
	if note := nvmeRatesNote(res.Rows[:min(shown, len(res.Rows))]); note != "" {
		notes = append(notes, note)
	}
	if n := len(res.Rows); n > shown {
		more := fmt.Sprintf("%d more rows", n-shown)
		if n-shown == 1 {
			more = "1 more row"
		}
		notes = append(notes, more+": advise(plan, top=None) lists them all")
	}
	if s := res.Stats; s.Singles+s.Pairs+s.Rejected > 0 {
		short := ""
		if s.HostShort > 0 { // replayed, and again without the check: what the GPU would use
			short = fmt.Sprintf("%d of them short of host_memory; ", s.HostShort)
		}
		notes = append(notes, fmt.Sprintf("%d single changes and %d pairs replayed (%s%d rejected by the plan), %d replays in all", s.Singles, s.Pairs, short, s.Rejected, s.Replays))
	}
	return notes, nil
}

// nvmeRatesNote says at what rates the shown rows that put state on
// NVMe (ZeRO-Infinity) priced it when the cluster does not give both of
// its node's rates: memsh's default then stands for the user's drives.
func nvmeRatesNote(rows []advise.Row) string {
	for _, r := range rows {
		o, c := r.Plan.Offload, r.Plan.Cluster
		if o == nil || (o.Optimizer != "nvme" && o.Params != "nvme") || (c.NVMeReadGBps > 0 && c.NVMeWriteGBps > 0) {
			continue
		}
		read, write := c.NVMeRates()
		return fmt.Sprintf("the NVMe rows price the node's NVMe at %.3g GB/s reads and %.3g GB/s writes, shared by its GPUs "+
			"(cluster() gives no rate: DeepSpeed's four-drive RAID-0); cluster(nvme_read=, nvme_write=) gives your node's", read/1e9, write/1e9)
	}
	return ""
}

// rowText is a row's change as keywords.
func rowText(r advise.Row, plan *plans.Plan, decl syntax.Position) (string, error) {
	_, text, err := changedPlan(r, plan, decl)
	return text, err
}

// columnOf is the index of column name in columns.
func columnOf(columns []string, name string) int {
	for j, c := range columns {
		if c == name {
			return j
		}
	}
	panic("internal error: no column " + name)
}
