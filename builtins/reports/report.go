package reports

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// Report is the Starlark value of a simulated step (type "report"), from
// simulate(plan). Its attributes are declared in report_fields.go (memsh
// doc simulate, docs/json.md); print(r) renders a table
// (render_report.go).
type Report struct {
	r     *replay.Report
	plan  *plans.Plan
	color bool // render with ANSI colour (the run's State.Color at simulate time)
}

var _ starlark.HasAttrs = (*Report)(nil)

// NewReport wraps r, the result of simulating plan. color says whether
// String renders with ANSI colour.
func NewReport(r *replay.Report, plan *plans.Plan, color bool) *Report {
	return &Report{r: r, plan: plan, color: color}
}

// SimReport returns the wrapped report.
func (x *Report) SimReport() *replay.Report { return x.r }

func (x *Report) Type() string         { return "report" }
func (x *Report) Freeze()              {}
func (x *Report) Truth() starlark.Bool { return starlark.True }
func (x *Report) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: report")
}

func ReportBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "simulate",
		Sig:  "simulate(plan, timeline=False)",
		Doc:  SimulateDoc(),
		Fn:   SimulateFn,
	}}
}

func SimulateFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pv starlark.Value
	timeline := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "plan", &pv, "timeline?", &timeline); err != nil {
		return nil, err
	}
	plan, ok := pv.(*plans.Plan)
	if !ok {
		return nil, fmt.Errorf("plan must be a plan from train() (got %s)", pv.Type())
	}
	ctx := host.RunContext(thread)
	rep, err := sim.Evaluate(plan.P, core.Options{Timeline: timeline, Context: ctx})
	if serr := host.StoppedBy(ctx, "simulate", err); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, host.WithOrigin(err, plan.Decl())
	}
	out := NewReport(rep, plan, host.StateOf(thread).Color)
	host.StateOf(thread).Simulate(out)
	return out, nil
}

func (x *Report) AttrNames() []string { return reportAttrNames() }

func (x *Report) Attr(name string) (starlark.Value, error) {
	if m, ok := reportMethods[name]; ok {
		return m(x), nil
	}
	switch name {
	case "timeline":
		if x.r.Timeline == nil {
			return nil, fmt.Errorf("report has no timeline: use simulate(plan, timeline=True)")
		}
	}
	f, ok := reportFieldNamed(name)
	if !ok || f.Attr == nil {
		return nil, aliasError(name)
	}
	return f.Attr(x), nil
}

// Getters of fields whose attribute and as_dict forms differ (plain: the
// as_dict form).

func statesField(x *Report, _ bool) starlark.Value {
	s, i64 := x.r.States, starlark.MakeInt64
	return host.FrozenDict("params", i64(s.Params), "grads", i64(s.Grads), "master", i64(s.Master),
		"optimizer", i64(s.Optimizer), "buffers", i64(s.Buffers))
}

func trafficField(x *Report, _ bool) starlark.Value {
	t, i64 := x.r.Traffic, starlark.MakeInt64
	return host.FrozenDict("hbm", i64(t.HBM), "pcie", i64(t.PCIe), "nvme", i64(t.NVMe), "network", i64(t.Network))
}

// hostBreakdownField is r.host_breakdown: host memory per GPU by row,
// summing to r.host_memory.
func hostBreakdownField(x *Report, _ bool) starlark.Value {
	sums := map[string]int64{}
	var names []string
	for _, s := range x.r.HostBreakdown { // a name twice adds up
		if _, ok := sums[s.Name]; !ok {
			names = append(names, s.Name)
		}
		sums[s.Name] += s.Bytes
	}
	d := starlark.NewDict(len(names))
	for _, n := range names {
		_ = d.SetKey(starlark.String(n), starlark.MakeInt64(sums[n]))
	}
	d.Freeze()
	return d
}

func peakAtField(x *Report, plain bool) starlark.Value {
	return host.Record(plain, starlark.StringDict{"phase": starlark.String(x.r.PeakAt.Phase.String()), "op": starlark.String(x.r.PeakAt.Op)})
}

func largestField(x *Report, plain bool) starlark.Value {
	return host.Record(plain, allocFields(x.r.Largest, plain))
}

func oomField(x *Report, plain bool) starlark.Value {
	if x.r.OOM == nil {
		return starlark.None
	}
	f := allocFields(x.r.OOM.Alloc, plain)
	f["message"] = starlark.String(x.r.OOM.Message)
	return host.Record(plain, f)
}

func commBytesField(x *Report, _ bool) starlark.Value {
	if !x.HasTime() {
		return starlark.None
	}
	return starlark.MakeInt64(x.r.Traffic.Network)
}

func overheadsField(x *Report) starlark.Value {
	out := make([]starlark.Value, len(x.r.Overheads))
	for i, o := range x.r.Overheads {
		out[i] = host.NewStruct(starlark.StringDict{
			"name": starlark.String(o.Name), "bytes": starlark.MakeInt64(o.Bytes), "source": starlark.String(o.Source()),
		})
	}
	return host.FrozenList(out)
}

// timeBreakdownField is r.time_breakdown: seconds of the step by cause,
// the time line of print(r); as_dict and --json have it too.
func timeBreakdownField(x *Report) starlark.Value {
	if !x.HasTime() {
		return starlark.None
	}
	d := starlark.NewDict(len(x.r.Time.Breakdown))
	for _, s := range x.r.Time.Breakdown {
		_ = d.SetKey(starlark.String(s.Name), starlark.Float(s.Seconds))
	}
	d.Freeze()
	return d
}

// ranks is a report per pipeline stage; plain gives their as_dict forms.
func (x *Report) ranks(plain bool) starlark.Value {
	out := make([]starlark.Value, len(x.r.Ranks))
	for i, rr := range x.r.Ranks {
		r := NewReport(rr, x.plan, x.color)
		if plain {
			r.color = false
			out[i] = r.AsDict()
		} else {
			out[i] = r
		}
	}
	return host.FrozenList(out)
}

// timeFigure is None when the time model has not run (StepSeconds 0) or
// could not (a custom gpu without bf16_tflops or hbm_gbps gives an
// infinite step time), never a meaningless number.
func (x *Report) TimeFigure(v float64) starlark.Value {
	if !x.HasTime() || math.IsNaN(v) || math.IsInf(v, 0) {
		return starlark.None
	}
	return starlark.Float(v)
}

// hasTime reports whether the time model gave a finite step time.
func (x *Report) HasTime() bool {
	s := x.r.Time.StepSeconds
	return s > 0 && !math.IsInf(s, 0) && !math.IsNaN(s)
}

// allocFields describes one allocation: tensor, op, shape, dtype, bytes,
// why, phase.
func allocFields(a replay.Alloc, plain bool) starlark.StringDict {
	shape := make([]starlark.Value, len(a.Shape))
	for i, n := range a.Shape {
		shape[i] = starlark.MakeInt64(n)
	}
	var dt starlark.Value = host.NewDType(a.DType)
	if plain || a.DType == units.InvalidDType {
		dt = starlark.String(a.DType.Name())
	}
	return starlark.StringDict{
		"tensor": starlark.String(a.Tensor),
		"op":     starlark.String(a.Op),
		"shape":  host.FrozenList(shape),
		"dtype":  dt,
		"bytes":  starlark.MakeInt64(a.Bytes),
		"why":    starlark.String(a.Why),
		"phase":  starlark.String(a.Phase.String()),
	}
}

// timeline is the allocation events: one dict per event with phase, op,
// allocated, reserved and the bytes of each category.
func (x *Report) timeline() *starlark.List {
	cats := core.CategoryNames()
	out := make([]starlark.Value, len(x.r.Timeline))
	for i, p := range x.r.Timeline {
		d := starlark.NewDict(4 + len(cats))
		d.SetKey(starlark.String("phase"), starlark.String(p.Phase.String()))
		d.SetKey(starlark.String("op"), starlark.String(p.Op))
		d.SetKey(starlark.String("allocated"), starlark.MakeInt64(p.Allocated))
		d.SetKey(starlark.String("reserved"), starlark.MakeInt64(p.Reserved))
		for c, name := range cats {
			d.SetKey(starlark.String(name), starlark.MakeInt64(p.ByCat[c]))
		}
		d.Freeze()
		out[i] = d
	}
	return host.FrozenList(out)
}

// asDict is r.as_dict(): every field in its plain form (ints, floats,
// strings, lists and dicts, json.encode-able), in reportFields' order.
func (x *Report) AsDict() *starlark.Dict {
	d := starlark.NewDict(len(ReportFields))
	for _, f := range ReportFields {
		if f.Dict == nil {
			continue
		}
		if v := f.Dict(x); v != nil {
			_ = d.SetKey(starlark.String(f.Name), v)
		}
	}
	d.Freeze()
	return d
}
