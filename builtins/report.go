package builtins

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Report is the Starlark value of a simulated step (type "report"), from
// simulate(plan). Its attributes are DESIGN.md section 2.5; print(r)
// renders a table (render_report.go).
type Report struct {
	r     *sim.Report
	plan  *Plan
	color bool // render with ANSI colour (the run's State.Color at simulate time)
}

var _ starlark.HasAttrs = (*Report)(nil)

// NewReport wraps r, the result of simulating plan. color says whether
// String renders with ANSI colour.
func NewReport(r *sim.Report, plan *Plan, color bool) *Report {
	return &Report{r: r, plan: plan, color: color}
}

// SimReport returns the wrapped report.
func (x *Report) SimReport() *sim.Report { return x.r }

func (x *Report) Type() string         { return "report" }
func (x *Report) Freeze()              {}
func (x *Report) Truth() starlark.Bool { return starlark.True }
func (x *Report) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: report")
}

func reportBuiltins() []Builtin {
	return []Builtin{{
		Name: "simulate",
		Sig:  "simulate(plan, timeline=False)",
		Doc: "Replays one steady-state step of plan on one GPU and returns its report. print(r) shows a table; " +
			"r.fits, r.peak_allocated (torch.cuda.max_memory_allocated), r.peak_reserved (max_memory_reserved), " +
			"r.device_used (nvidia-smi), r.capacity, r.headroom, r.breakdown (bytes by category at the peak), " +
			"r.peak_at (.phase, .op), r.largest (.tensor .op .shape .dtype .bytes .why .phase), r.oom (None or " +
			".message in PyTorch's words and the failing allocation), r.states (params, grads, master, optimizer, buffers), " +
			"r.saved_activations, r.host_memory, r.traffic (hbm, pcie, nvme, network), r.params, " +
			"r.trainable_params, r.ranks, r.notes, r.summary (one line), r.plan. r.timeline, the allocation events " +
			"for plots, is recorded only with timeline=True. The time model gives r.step_time (seconds), r.mfu and " +
			"r.hfu (model and hardware FLOPs utilisation, 0 to 1), r.tokens_per_s (over all data-parallel replicas), " +
			"r.time_breakdown (seconds by cause: forward, backward, recompute, exposed tp/cp/ep/pp/fsdp/dp " +
			"communication, pipeline bubble, optimizer, offload) and r.comm_bytes (None when it has not run). r.as_dict() is a plain dict for json.encode.",
		Fn: simulateFn,
	}}
}

func simulateFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pv starlark.Value
	timeline := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "plan", &pv, "timeline?", &timeline); err != nil {
		return nil, err
	}
	plan, ok := pv.(*Plan)
	if !ok {
		return nil, fmt.Errorf("plan must be a plan from train() (got %s)", pv.Type())
	}
	ctx := runContext(thread) // stop.go
	rep, err := sim.Evaluate(plan.p, sim.Options{Timeline: timeline, Context: ctx})
	if serr := stoppedBy(ctx, "simulate", err); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, WithOrigin(err, plan.decl)
	}
	out := NewReport(rep, plan, StateOf(thread).Color)
	StateOf(thread).simulated(out)
	return out, nil
}

var reportAttrNames = []string{
	"as_dict", "breakdown", "capacity", "collectives", "comm_bytes", "device_used", "fits", "headroom",
	"hfu", "host_memory", "largest", "mfu", "notes", "oom", "overheads", "params", "peak_allocated",
	"peak_at", "peak_reserved", "plan", "ranks", "saved_activations", "saved_weight_copies",
	"states", "step_time", "summary", "tables", "time_breakdown", "timeline", "tokens_per_s", "traffic", "trainable_params",
}

func (x *Report) AttrNames() []string { return reportAttrNames }

func (x *Report) Attr(name string) (starlark.Value, error) {
	r := x.r
	switch name {
	case "as_dict":
		return starlark.NewBuiltin("as_dict", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
				return nil, err
			}
			return x.asDict(), nil
		}).BindReceiver(x), nil
	case "plan":
		return x.plan, nil
	case "summary":
		return starlark.String(x.summary()), nil
	case "timeline":
		if r.Timeline == nil {
			return nil, fmt.Errorf("report has no timeline: use simulate(plan, timeline=True)")
		}
		return x.timeline(), nil
	case "ranks":
		out := make([]starlark.Value, len(r.Ranks))
		for i, rr := range r.Ranks {
			out[i] = NewReport(rr, x.plan, x.color)
		}
		return frozenList(out), nil
	case "overheads":
		out := make([]starlark.Value, len(r.Overheads))
		for i, o := range r.Overheads {
			out[i] = newStruct(starlark.StringDict{
				"name": starlark.String(o.Name), "bytes": starlark.MakeInt64(o.Bytes), "source": starlark.String(o.Source),
			})
		}
		return frozenList(out), nil
	case "time_breakdown":
		// timemodel.go: seconds of the step by cause (forward, backward,
		// recompute, exposed communication, bubble, optimizer, offload);
		// not in as_dict, whose form is the JSON schema's.
		if !x.hasTime() {
			return starlark.None, nil
		}
		d := starlark.NewDict(len(r.Time.Breakdown))
		for _, s := range r.Time.Breakdown {
			_ = d.SetKey(starlark.String(s.Name), starlark.Float(s.Seconds))
		}
		d.Freeze()
		return d, nil
	case "collectives":
		return collectives(r), nil // parallel.go: bytes per collective kind
	case "notes":
		out := make([]starlark.Value, len(r.Notes))
		for i, n := range r.Notes {
			out[i] = starlark.String(n)
		}
		return frozenList(out), nil
	}
	// The rest have the same form in attributes and in as_dict, except
	// that attributes give structs where as_dict gives dicts.
	v, ok := x.field(name, false)
	if !ok {
		return nil, nil
	}
	return v, nil
}

// field returns the value of a data attribute; plain selects the as_dict
// form (dicts instead of structs, dtype names instead of dtype values).
func (x *Report) field(name string, plain bool) (starlark.Value, bool) {
	r := x.r
	i64 := starlark.MakeInt64
	switch name {
	case "fits":
		return starlark.Bool(r.Fits), true
	case "peak_allocated":
		return i64(r.PeakAllocated), true
	case "peak_reserved":
		return i64(r.PeakReserved), true
	case "device_used":
		return i64(r.DeviceUsed), true
	case "capacity":
		return i64(r.Capacity), true
	case "headroom":
		return i64(r.Headroom), true
	case "saved_activations":
		return i64(r.SavedActivations), true
	case "saved_weight_copies":
		return i64(r.SavedWeightCopies), true
	case "host_memory":
		return i64(r.HostMemory), true
	case "params":
		return i64(r.Params), true
	case "trainable_params":
		return i64(r.TrainableParams), true
	case "breakdown":
		d := starlark.NewDict(len(r.Breakdown))
		for _, s := range r.Breakdown {
			d.SetKey(starlark.String(s.Name), i64(s.Bytes))
		}
		d.Freeze()
		return d, true
	case "states":
		return frozenDict(
			"params", i64(r.States.Params), "grads", i64(r.States.Grads),
			"master", i64(r.States.Master), "optimizer", i64(r.States.Optimizer), "buffers", i64(r.States.Buffers)), true
	case "tables":
		return tableReports(r, plain), true // table.go
	case "traffic":
		return frozenDict(
			"hbm", i64(r.Traffic.HBM), "pcie", i64(r.Traffic.PCIe),
			"nvme", i64(r.Traffic.NVMe), "network", i64(r.Traffic.Network)), true
	case "peak_at":
		return record(plain, starlark.StringDict{"phase": starlark.String(r.PeakAt.Phase), "op": starlark.String(r.PeakAt.Op)}), true
	case "largest":
		return record(plain, allocFields(r.Largest, plain)), true
	case "oom":
		if r.OOM == nil {
			return starlark.None, true
		}
		f := allocFields(r.OOM.Alloc, plain)
		f["message"] = starlark.String(r.OOM.Message)
		return record(plain, f), true
	case "step_time":
		return x.timeFigure(r.Time.StepSeconds), true
	case "mfu":
		return x.timeFigure(r.Time.MFU), true
	case "hfu":
		return x.timeFigure(r.Time.HFU), true
	case "tokens_per_s":
		return x.timeFigure(r.Time.TokensPerS), true
	case "comm_bytes":
		if !x.hasTime() {
			return starlark.None, true
		}
		return i64(r.Traffic.Network), true
	}
	return nil, false
}

// timeFigure is None when the time model has not run (StepSeconds 0) or
// could not (a custom gpu without bf16_tflops or hbm_gbps gives an
// infinite step time), never a meaningless number.
func (x *Report) timeFigure(v float64) starlark.Value {
	if !x.hasTime() || math.IsNaN(v) || math.IsInf(v, 0) {
		return starlark.None
	}
	return starlark.Float(v)
}

// hasTime reports whether the time model gave a finite step time.
func (x *Report) hasTime() bool {
	s := x.r.Time.StepSeconds
	return s > 0 && !math.IsInf(s, 0) && !math.IsNaN(s)
}

// allocFields describes one allocation: tensor, op, shape, dtype, bytes,
// why, phase.
func allocFields(a sim.Alloc, plain bool) starlark.StringDict {
	shape := make([]starlark.Value, len(a.Shape))
	for i, n := range a.Shape {
		shape[i] = starlark.MakeInt64(n)
	}
	var dt starlark.Value = NewDType(a.DType)
	if plain || a.DType == sim.InvalidDType {
		dt = starlark.String(a.DType.Name())
	}
	return starlark.StringDict{
		"tensor": starlark.String(a.Tensor),
		"op":     starlark.String(a.Op),
		"shape":  frozenList(shape),
		"dtype":  dt,
		"bytes":  starlark.MakeInt64(a.Bytes),
		"why":    starlark.String(a.Why),
		"phase":  starlark.String(a.Phase),
	}
}

// record is a struct, or (plain) a dict with sorted keys.
func record(plain bool, f starlark.StringDict) starlark.Value {
	if !plain {
		return newStruct(f)
	}
	d := starlark.NewDict(len(f))
	for _, k := range f.Keys() {
		d.SetKey(starlark.String(k), f[k])
	}
	d.Freeze()
	return d
}

func newStruct(f starlark.StringDict) *starlarkstruct.Struct {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, f)
}

func frozenList(vs []starlark.Value) *starlark.List {
	l := starlark.NewList(vs)
	l.Freeze()
	return l
}

// frozenDict builds a dict from alternating string keys and values, in order.
func frozenDict(kv ...any) *starlark.Dict {
	d := starlark.NewDict(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		d.SetKey(starlark.String(kv[i].(string)), kv[i+1].(starlark.Value))
	}
	d.Freeze()
	return d
}

// timeline is the allocation events: one dict per event with phase, op,
// allocated, reserved and the bytes of each category.
func (x *Report) timeline() *starlark.List {
	cats := sim.CategoryNames()
	out := make([]starlark.Value, len(x.r.Timeline))
	for i, p := range x.r.Timeline {
		d := starlark.NewDict(4 + len(cats))
		d.SetKey(starlark.String("phase"), starlark.String(p.Phase))
		d.SetKey(starlark.String("op"), starlark.String(p.Op))
		d.SetKey(starlark.String("allocated"), starlark.MakeInt64(p.Allocated))
		d.SetKey(starlark.String("reserved"), starlark.MakeInt64(p.Reserved))
		for c, name := range cats {
			d.SetKey(starlark.String(name), starlark.MakeInt64(p.ByCat[c]))
		}
		d.Freeze()
		out[i] = d
	}
	return frozenList(out)
}

// asDict is r.as_dict(): every data attribute as ints, floats, strings,
// lists and dicts (json.encode-able), plus model, gpu and plan strings.
func (x *Report) asDict() *starlark.Dict {
	d := starlark.NewDict(32)
	set := func(k string, v starlark.Value) { d.SetKey(starlark.String(k), v) }
	set("model", starlark.String(x.plan.p.Model.Name))
	set("gpu", starlark.String(x.plan.p.Device.Name))
	set("plan", starlark.String(x.plan.String()))
	for _, name := range reportAttrNames {
		if v, ok := x.field(name, true); ok {
			set(name, v)
		}
	}
	notes := make([]starlark.Value, len(x.r.Notes))
	for i, n := range x.r.Notes {
		notes[i] = starlark.String(n)
	}
	set("notes", frozenList(notes))
	ranks := make([]starlark.Value, len(x.r.Ranks))
	for i, rr := range x.r.Ranks {
		ranks[i] = NewReport(rr, x.plan, false).asDict()
	}
	set("ranks", frozenList(ranks))
	if x.r.Timeline != nil {
		set("timeline", x.timeline())
	}
	d.Freeze()
	return d
}
