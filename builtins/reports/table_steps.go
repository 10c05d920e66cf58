package reports

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

func TableStepsBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "table_steps",
			Sig:  "table_steps(plan, rows_per_step, pool=\"torch\")",
			Doc: "Replays len(rows_per_step) consecutive training steps of plan through one allocator: parameters and " +
				"optimizer state persist, each step's tensors are freed at its end. rows_per_step[i] is the distinct rows " +
				"each head of each sparse table reads in step i (tables with pad_rows=True pad to the maximum anyway). " +
				"pool=\"torch\" is PyTorch's caching allocator alone: it reuses cached blocks for new sizes, so reserved " +
				"memory stays bounded; pool=\"exact\" puts a buffer pool keyed by exact size (as the story's code had) in " +
				"front of it for the tables' own buffers, which then grows with every new row count.\n\n" +
				"Returns a value that prints as a table, with .steps (one struct per step: step, rows, peak_allocated, " +
				"peak_reserved, end_reserved, pool_idle, fits), .growth (end_reserved of the last step minus the first's) " +
				"and .pool.",
			Fn: tableStepsFn,
		},
	}
}

// maxTableSteps bounds table_steps' series, so a long list is an error and
// not minutes of replays.
const maxTableSteps = 10_000

var _ starlark.HasAttrs = (*TableSteps)(nil)

func tableStepsFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pv, rv starlark.Value
	pool := "torch"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "plan", &pv, "rows_per_step", &rv, "pool?", &pool); err != nil {
		return nil, err
	}
	plan, ok := pv.(*plans.Plan)
	if !ok {
		return nil, fmt.Errorf("plan must be a plan from train() (got %s)", pv.Type())
	}
	seq, ok := rv.(starlark.Indexable)
	if !ok {
		return nil, fmt.Errorf("rows_per_step must be a list of ints (got %s)", rv.Type())
	}
	if n := seq.Len(); n > maxTableSteps {
		return nil, host.WithHint(fmt.Errorf("table_steps: rows_per_step has %d steps, more than %d", n, maxTableSteps),
			"each step is a full replay: a few hundred steps show how the allocator's cache settles")
	}
	rows := make([]int64, seq.Len())
	for i := range rows {
		n, err := host.AsInt64(seq.Index(i), fmt.Sprintf("rows_per_step[%d]", i))
		if err != nil {
			return nil, err
		}
		rows[i] = n
	}
	ctx := host.RunContext(thread)
	rep, err := sim.EvaluateSteps(plan.SimPlan(), core.Options{Context: ctx}, replay.StepSeries{TableRows: rows, Pool: pool})
	if serr := host.StoppedBy(ctx, "table_steps", err); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, host.WithOrigin(err, plan.Decl())
	}
	return &TableSteps{r: rep}, nil
}

// TableSteps is the Starlark value of table_steps() (type "table_steps").
type TableSteps struct{ r *replay.StepsReport }

func (x *TableSteps) Type() string { return "table_steps" }

func (x *TableSteps) Freeze() {}

func (x *TableSteps) Truth() starlark.Bool { return starlark.True }

func (x *TableSteps) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: table_steps")
}

var tableStepsAttrNames = []string{"growth", "pool", "steps"}

func (x *TableSteps) AttrNames() []string { return tableStepsAttrNames }

func (x *TableSteps) Attr(name string) (starlark.Value, error) {
	switch name {
	case "pool":
		return starlark.String(x.r.Pool), nil
	case "growth":
		return starlark.MakeInt64(x.growth()), nil
	case "steps":
		out := make([]starlark.Value, len(x.r.Steps))
		for i, s := range x.r.Steps {
			out[i] = host.NewStruct(starlark.StringDict{
				"step":           starlark.MakeInt(s.Step),
				"rows":           starlark.MakeInt64(s.LeafRows),
				"peak_allocated": starlark.MakeInt64(s.PeakAllocated),
				"peak_reserved":  starlark.MakeInt64(s.PeakReserved),
				"end_reserved":   starlark.MakeInt64(s.EndReserved),
				"pool_idle":      starlark.MakeInt64(s.PoolIdle),
				"fits":           starlark.Bool(s.Fits),
			})
		}
		return host.FrozenList(out), nil
	}
	return nil, nil
}

func (x *TableSteps) growth() int64 {
	s := x.r.Steps
	return s[len(s)-1].EndReserved - s[0].EndReserved
}

// String renders one line per step.
func (x *TableSteps) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d steps, pool %s: reserved grew %s\n", len(x.r.Steps), x.r.Pool, units.FormatBytes(x.growth()))
	g := &host.TextGrid{Right: []bool{true, true, true, true, true, false}}
	g.Add("step", "rows/head", "peak allocated", "peak reserved", "pool idle", "fits")
	for _, s := range x.r.Steps {
		fits := "yes"
		if !s.Fits {
			fits = "no"
		}
		g.Add(fmt.Sprint(s.Step), fmt.Sprint(s.LeafRows), units.FormatBytes(s.PeakAllocated),
			units.FormatBytes(s.PeakReserved), units.FormatBytes(s.PoolIdle), fits)
	}
	g.Write(&b, "  ")
	return strings.TrimRight(b.String(), "\n")
}
