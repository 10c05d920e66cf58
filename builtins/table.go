package builtins

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim"
	"go.starlark.net/starlark"
)

// Tables (DESIGN.md 2.3): the table() layer, the per-table figures of a
// report (r.tables) and table_steps(), which replays several steps through
// one allocator (SEEDS.md story 4's allocator lesson).

func tableBuiltins() []Builtin {
	return []Builtin{
		{
			Name: "table",
			Sig:  "table(name, rows, dim, heads=1, reads_per_token=None, grad=\"dense\", placement=\"device\", pad_rows=True)",
			Doc: "An embedding or n-gram memory table: heads tables of rows x dim (rows is per head; params = rows * heads * dim), " +
				"read by hashed row indices computed from the batch's token ids. Each token reads reads_per_token rows " +
				"(default one per head; a multiple of heads, summed per head); the output is the heads' rows concatenated, " +
				"[batch, seq, heads * dim], so residual(table(...)) adds them to a residual stream of that width. " +
				"The model must start with an embedding.\n\n" +
				"grad=\"dense\": the table is a parameter with a table-sized gradient, stepped by the plan's optimizer " +
				"(AdamW: 12 bytes/param with the moments, and it reads and writes the whole table every step). " +
				"grad=\"sparse\": each step the distinct rows read are copied into a small leaf tensor that alone gets a " +
				"gradient, and a row-wise AdamW (SparseAdam-style) updates only those rows; the moments stay table-sized. " +
				"pad_rows pads each head's row list to the maximum (positions x reads per head) with a spare row so every " +
				"step has the same tensor sizes (see table_steps). placement=\"host\" (sparse only) keeps table and moments " +
				"in host memory: rows are sent over PCIe before the forward and gradients return after the backward " +
				"(r.traffic[\"pcie\"] is the bytes each way; r.tables has the transfer and host access times).",
			Fn: tableFn,
		},
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

func tableFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var rows, dim, heads, reads starlark.Value
	grad, placement := "dense", "device"
	pad := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "rows", &rows, "dim", &dim,
		"heads?", &heads, "reads_per_token?", &reads, "grad?", &grad, "placement?", &placement, "pad_rows?", &pad); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("table name must not be empty")
	}
	t := &sim.Table{Name: name, Grad: grad, Placement: placement, PadRows: pad}
	if err := ints(intArg{rows, "rows", &t.Rows}, intArg{dim, "dim", &t.Dim}); err != nil {
		return nil, err
	}
	var err error
	if t.Heads, err = optInt(heads, "heads", 1); err != nil {
		return nil, err
	}
	if t.ReadsPerToken, err = optInt(reads, "reads_per_token", 0); err != nil {
		return nil, err
	}
	if reads != nil && reads != starlark.None && t.ReadsPerToken <= 0 {
		return nil, fmt.Errorf("reads_per_token must be positive (got %d)", t.ReadsPerToken)
	}
	return newLayer(thread, t)
}

// maxTableSteps bounds table_steps' series, so a long list is an error and
// not minutes of replays.
const maxTableSteps = 10_000

func tableStepsFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pv, rv starlark.Value
	pool := "torch"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "plan", &pv, "rows_per_step", &rv, "pool?", &pool); err != nil {
		return nil, err
	}
	plan, ok := pv.(*Plan)
	if !ok {
		return nil, fmt.Errorf("plan must be a plan from train() (got %s)", pv.Type())
	}
	seq, ok := rv.(starlark.Indexable)
	if !ok {
		return nil, fmt.Errorf("rows_per_step must be a list of ints (got %s)", rv.Type())
	}
	if n := seq.Len(); n > maxTableSteps {
		return nil, withHint(fmt.Errorf("table_steps: rows_per_step has %d steps, more than %d", n, maxTableSteps),
			"each step is a full replay: a few hundred steps show how the allocator's cache settles")
	}
	rows := make([]int64, seq.Len())
	for i := range rows {
		n, err := AsInt64(seq.Index(i), fmt.Sprintf("rows_per_step[%d]", i))
		if err != nil {
			return nil, err
		}
		rows[i] = n
	}
	ctx := runContext(thread) // stop.go
	rep, err := sim.EvaluateSteps(plan.SimPlan(), sim.Options{Context: ctx}, sim.StepSeries{TableRows: rows, Pool: pool})
	if serr := stoppedBy(ctx, "table_steps", err); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, WithOrigin(err, plan.Decl())
	}
	return &TableSteps{r: rep}, nil
}

// TableSteps is the Starlark value of table_steps() (type "table_steps").
type TableSteps struct{ r *sim.StepsReport }

var _ starlark.HasAttrs = (*TableSteps)(nil)

func (x *TableSteps) Type() string         { return "table_steps" }
func (x *TableSteps) Freeze()              {}
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
			out[i] = newStruct(starlark.StringDict{
				"step":           starlark.MakeInt(s.Step),
				"rows":           starlark.MakeInt64(s.LeafRows),
				"peak_allocated": starlark.MakeInt64(s.PeakAllocated),
				"peak_reserved":  starlark.MakeInt64(s.PeakReserved),
				"end_reserved":   starlark.MakeInt64(s.EndReserved),
				"pool_idle":      starlark.MakeInt64(s.PoolIdle),
				"fits":           starlark.Bool(s.Fits),
			})
		}
		return frozenList(out), nil
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
	fmt.Fprintf(&b, "%d steps, pool %s: reserved grew %s\n", len(x.r.Steps), x.r.Pool, sim.FormatBytes(x.growth()))
	g := &textGrid{right: []bool{true, true, true, true, true, false}}
	g.add("step", "rows/head", "peak allocated", "peak reserved", "pool idle", "fits")
	for _, s := range x.r.Steps {
		fits := "yes"
		if !s.Fits {
			fits = "no"
		}
		g.add(fmt.Sprint(s.Step), fmt.Sprint(s.LeafRows), sim.FormatBytes(s.PeakAllocated),
			sim.FormatBytes(s.PeakReserved), sim.FormatBytes(s.PoolIdle), fits)
	}
	g.write(&b, "  ")
	return strings.TrimRight(b.String(), "\n")
}

// tableReports is r.tables: one struct (or, plain, dict) per table layer.
func tableReports(r *sim.Report, plain bool) starlark.Value {
	out := make([]starlark.Value, len(r.Tables))
	for i, t := range r.Tables {
		i64 := starlark.MakeInt64
		f := starlark.StringDict{
			"name": starlark.String(t.Name), "grad": starlark.String(t.Grad), "placement": starlark.String(t.Placement),
			"params": i64(t.Params), "rows_read": i64(t.RowsRead), "leaf_rows": i64(t.LeafRows),
			"padded":       starlark.Bool(t.Padded),
			"device_bytes": i64(t.DeviceBytes), "host_bytes": i64(t.HostBytes),
			"optimizer_hbm": i64(t.OptimizerHBM), "pcie_each_way": i64(t.PCIeEachWay),
			"pcie_gbps":       starlark.Float(t.Transfer.LinkGBps),
			"pcie_round_trip": starlark.Float(t.Transfer.PCIeSeconds),
			"host_access":     starlark.Float(t.Transfer.Host.Seconds),
			"host_assumption": starlark.String(""),
		}
		if t.Placement == "host" {
			f["host_assumption"] = starlark.String(t.Transfer.Host.Assumption())
		}
		out[i] = record(plain, f)
	}
	return frozenList(out)
}
