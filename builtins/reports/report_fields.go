package reports

import (
	"fmt"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"go.starlark.net/starlark"
)

// reportField is one field of a report, declared once: the attribute
// r.<name>, its key in r.as_dict() and in `memsh run --json` (whose Go
// schema, jsondoc.Report, a test holds to this table), its unit, its line
// in `memsh doc simulate`, and whether sweep() and search() tables show it
// as a column. Adding a report field is one entry here plus the engine
// code that computes it.
type reportField struct {
	Name string
	unit string // UnitBytes, UnitSeconds, UnitFraction or ""
	Doc  string
	// column is the field's position among the figure columns of sweep()
	// tables (1 first); 0 when it is not one.
	column int
	// attr is the attribute's value; nil when the field is only in
	// as_dict (model, gpu).
	Attr func(x *Report) starlark.Value
	// dict is the value in as_dict and the JSON document (plain values:
	// dicts instead of structs, dtype names); nil when the field is an
	// attribute only.
	Dict func(x *Report) starlark.Value
}

// data is a field whose attribute and as_dict values come from one getter
// (plain selects the as_dict form).
func data(name, unit, doc string, get func(x *Report, plain bool) starlark.Value) reportField {
	return reportField{Name: name, unit: unit, Doc: doc,
		Attr: func(x *Report) starlark.Value { return get(x, false) },
		Dict: func(x *Report) starlark.Value { return get(x, true) }}
}

// figure is data for a field that is also a sweep column.
func figure(column int, name, unit, doc string, get func(x *Report, plain bool) starlark.Value) reportField {
	f := data(name, unit, doc, get)
	f.column = column
	return f
}

func bytesField(name, doc string, get func(x *Report) int64) reportField {
	return data(name, host.UnitBytes, doc, func(x *Report, _ bool) starlark.Value { return starlark.MakeInt64(get(x)) })
}

// reportFields are the report's fields; as_dict keeps this order. They are
// set once, in init: a rank's as_dict form refers back to the table.
var ReportFields []reportField

func init() { ReportFields = declaredReportFields() }

// declaredReportFields is the table of reportFields.
func declaredReportFields() []reportField {
	return []reportField{
		{Name: "model", Doc: "the model's name (as_dict and JSON only)",
			Dict: func(x *Report) starlark.Value { return starlark.String(x.plan.P.Model.Name) }},
		{Name: "gpu", Doc: "the device's name (as_dict and JSON only)",
			Dict: func(x *Report) starlark.Value { return starlark.String(x.plan.P.Device.Name) }},
		{Name: "plan", Doc: "the plan (in as_dict and JSON, as the train() call that builds it)",
			Attr: func(x *Report) starlark.Value { return x.plan },
			Dict: func(x *Report) starlark.Value { return starlark.String(x.plan.String()) }},
		data("alloc_retries", "", "how many requests found no room under the card's limit, had the caching allocator release its cached segments (a cudaFree each, which synchronises the device) and retried: torch.cuda.memory_stats()[\"num_alloc_retries\"] after the step, counted up to the OOM when there is one (0 when the step never reached the limit); print(r) says what to do when it is above 0",
			func(x *Report, _ bool) starlark.Value { return starlark.MakeInt(x.r.AllocRetries) }),
		data("breakdown", host.UnitBytes, "device_used by cause, summing to it: bytes by category at the peak of allocated memory (params, grads, optimizer, activations, temporaries, comm: they sum to peak_allocated), fragmentation (free blocks the compute stream's pools held then), a row per side stream the step allocates on (all_gather_stream, reduce_scatter_stream, offload_stream, shared_expert_stream, pre_unshard_stream: its segments, cached between steps, less what it holds then), cuda_graph_pool (under compile_mode=\"reduce-overhead\": the CUDA graphs' private pool, likewise), each term outside PyTorch's allocator by name, as r.overheads (cuda_context, nccl_<group> per communicator), paged_optimizer (paged optimizer state in unified memory, outside the allocator) and reserved_later (reserve the allocator grew after that peak, when a later request found no cached block large enough; r.fragmentation says which)", breakdownField),
		bytesField("capacity", "device memory as PyTorch sees it (torch.cuda.get_device_properties().total_memory, the total capacity of its OOM message): the step must fit in it", func(x *Report) int64 { return x.r.Capacity }),
		{Name: "collectives", unit: host.UnitBytes, Doc: "bytes passed to collectives per step, by kind (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv)",
			Attr: func(x *Report) starlark.Value { return plans.Collectives(x.r) }},
		data("comm_bytes", host.UnitBytes, "bytes over the network per step (None when the time model has not run)", commBytesField),
		figure(2, "device_used", host.UnitBytes, "what nvidia-smi would show: reserved memory plus the CUDA context, NCCL and other memory outside PyTorch's allocator",
			func(x *Report, _ bool) starlark.Value { return starlark.MakeInt64(x.r.DeviceUsed) }),
		figure(1, "fits", "", "device_used within capacity, and no allocation failed",
			func(x *Report, _ bool) starlark.Value { return starlark.Bool(x.r.Fits) }),
		figure(3, "headroom", host.UnitBytes, "capacity - device_used; negative when the step does not fit",
			func(x *Report, _ bool) starlark.Value { return starlark.MakeInt64(x.r.Headroom) }),
		data("fragmentation", "", "why the reserve exceeds the allocated bytes: .free_blocks, .free_bytes and .largest_free, the free blocks cached at the peak of allocated memory (free_bytes is the breakdown's fragmentation); .peak_growth, None or the request after which the reserve reached its peak (.tensor, .op, .phase, .bytes) with what its pool cached then (.cached_blocks, .cached_bytes, .largest_cached: no block large enough when cached_bytes covers the request) and .reserved, the reserve after it", fragmentationField),
		data("hfu", host.UnitFraction, "hardware FLOPs utilisation (with recompute), 0 to 1 (None without a time model)",
			func(x *Report, _ bool) starlark.Value { return x.TimeFigure(x.r.Time.HFU) }),
		bytesField("host_memory", "host memory the step needs per GPU (offload, paged optimizer state, host tables)", func(x *Report) int64 { return x.r.HostMemory }),
		data("host_breakdown", host.UnitBytes, "host_memory by what holds it, bytes per GPU: the rows r.notes lists (offload's optimizer state and master weights, gradients, pinned gradient buffers, parameters, activations, ZeRO-Infinity's optimizer and parameter swap buffers; paged optimizer state; host tables)", hostBreakdownField),
		data("largest", "", "the largest single allocation: .tensor .op .shape .dtype .bytes .why .phase", largestField),
		data("modules", "", "the step by module (docs/time.md), slowest first, then the step's terms outside the modules: .name (module path with layer indices folded: layers.*.mlp), .count (instances folded), .flops and .bytes (forward, per step), .forward, .backward, .recompute, .launch (CPU dispatch beyond the GPU's work), .seconds (their sum: the rows add up to step_time), .bound (compute, memory or launch; comm, bubble, optimizer, host or overhead for a step term); None without a time model", modulesField),
		figure(6, "mfu", host.UnitFraction, "model FLOPs utilisation, 0 to 1 (None without a time model): the forward and the backward the step needs, no recompute; a frozen weight's gradient is not counted (docs/time.md)",
			func(x *Report, _ bool) starlark.Value { return x.TimeFigure(x.r.Time.MFU) }),
		{Name: "notes", Doc: "remarks of the engine: assumptions, and what to change when a step fails",
			Attr: notesField, Dict: notesField},
		data("oom", "", "None, or the first allocation that does not fit with .message, PyTorch's out-of-memory message", oomField),
		{Name: "overheads", Doc: "memory outside PyTorch's allocator, each with .name, .bytes and .source",
			Attr: overheadsField},
		data("params", "", "parameters of the model", func(x *Report, _ bool) starlark.Value { return starlark.MakeInt64(x.r.Params) }),
		figure(4, "peak_allocated", host.UnitBytes, "what torch.cuda.max_memory_allocated would report",
			func(x *Report, _ bool) starlark.Value { return starlark.MakeInt64(x.r.PeakAllocated) }),
		data("peak_at", "", "where the peak of allocated memory happens: .phase and .op", peakAtField),
		bytesField("peak_reserved", "what torch.cuda.max_memory_reserved would report (the caching allocator's model); for a steady step on one GPU, under Megatron's layouts or under FSDP2, the most over the first step and the steady one, which runs in the cache the first left", func(x *Report) int64 { return x.r.PeakReserved }),
		{Name: "ranks", Doc: "a report per pipeline stage, when there are several",
			Attr: func(x *Report) starlark.Value { return x.ranks(false) },
			Dict: func(x *Report) starlark.Value { return x.ranks(true) }},
		bytesField("saved_activations", "bytes held for backward at the end of the forward (storages, as autograd holds them)", func(x *Report) int64 { return x.r.SavedActivations }),
		bytesField("saved_weight_copies", "autocast's low-precision weight copies held for backward", func(x *Report) int64 { return x.r.SavedWeightCopies }),
		bytesField("smi_total", "the device's total as nvidia-smi shows it (memory.total): capacity plus what the driver reserves for itself; device_used is what nvidia-smi would show used of it", func(x *Report) int64 { return x.plan.P.Device.SMITotal() }),
		data("states", host.UnitBytes, "the model states per GPU at their fullest in the step: params, grads, master, optimizer, buffers", statesField),
		figure(5, "step_time", host.UnitSeconds, "seconds per optimizer step (None without a time model)",
			func(x *Report, _ bool) starlark.Value { return x.TimeFigure(x.r.Time.StepSeconds) }),
		data("samples_per_s", "", "samples per second over all data-parallel replicas: sequences for a language model (tokens_per_s / seq), input states for a weather model, each with all its ensemble members (None without a time model)",
			func(x *Report, _ bool) starlark.Value { return x.TimeFigure(x.samplesPerS()) }),
		{Name: "summary", Doc: "the verdict in one line",
			Attr: func(x *Report) starlark.Value { return starlark.String(x.summary()) }},
		data("tables", "", "one entry per embedding table of the model (table()): memory, traffic and transfer terms", func(x *Report, plain bool) starlark.Value { return tableReports(x.r, plain) }),
		{Name: "time_breakdown", unit: host.UnitSeconds, Doc: "seconds of the step by cause (docs/time.md): forward, backward, recompute, launch (CPU dispatch beyond the GPU's work), host_sync (what host syncs add, where the program makes them: the per-expert MoE loops), exposed communication (tp_comm, cp_comm, ep_comm, pp_comm, fsdp_comm, dp_comm), pipeline bubble, optimizer, cpu_optimizer (the optimizer step on the host: ZeRO-Offload's DeepSpeedCPUAdam, FSDP2 CPU offload's torch optimizer), nvme (ZeRO-Infinity's NVMe reads and writes), offload, step_overhead (None without a time model)",
			Attr: timeBreakdownField, Dict: timeBreakdownField},
		{Name: "timeline", Doc: "the allocation events, for plots: phase, op, allocated, reserved and bytes by category; recorded only with simulate(plan, timeline=True)",
			Attr: func(x *Report) starlark.Value { return x.timeline() },
			Dict: func(x *Report) starlark.Value {
				if x.r.Timeline == nil {
					return nil
				}
				return x.timeline()
			}},
		figure(7, "tokens_per_s", "", "tokens per second over all data-parallel replicas (None without a time model, and for a weather model, which reads no tokens: see samples_per_s)",
			func(x *Report, _ bool) starlark.Value {
				if !x.hasTokens() {
					return starlark.None
				}
				return x.TimeFigure(x.r.Time.TokensPerS)
			}),
		data("traffic", host.UnitBytes, "bytes moved per step by link: hbm, pcie, nvme, network", trafficField),
		data("trainable_params", "", "parameters that train", func(x *Report, _ bool) starlark.Value { return starlark.MakeInt64(x.r.TrainableParams) }),
	}
}

// reportFieldNamed finds a field by name.
func reportFieldNamed(name string) (reportField, bool) {
	for _, f := range ReportFields {
		if f.Name == name {
			return f, true
		}
	}
	return reportField{}, false
}

// reportAttrNames are the report's attributes, sorted: its fields that
// are attributes, the timeline and as_dict.
func reportAttrNames() []string {
	var names []string
	for m := range reportMethods {
		names = append(names, m)
	}
	for _, f := range ReportFields {
		if f.Attr != nil {
			names = append(names, f.Name)
		}
	}
	sort.Strings(names)
	return names
}

// figureColumns are sweep()'s figure columns, in column order.
func figureColumns() []reportField {
	var out []reportField
	for n := 1; ; n++ {
		found := false
		for _, f := range ReportFields {
			if f.column == n {
				out, found = append(out, f), true
			}
		}
		if !found {
			return out
		}
	}
}

// figureNames are the names of figureColumns.
func FigureNames() []string {
	cols := figureColumns()
	out := make([]string, len(cols))
	for i, f := range cols {
		out[i] = f.Name
	}
	return out
}

// reportFigures is the figure columns of a sweep row (all None without a
// report).
func ReportFigures(x *Report) []starlark.Value {
	cols := figureColumns()
	out := make([]starlark.Value, len(cols))
	for i, f := range cols {
		out[i] = starlark.None
		if x != nil {
			out[i] = f.Attr(x)
		}
	}
	return out
}

// columnUnit is the unit of a table column named after a report field ("" for
// other columns).
func ColumnUnit(name string) string {
	if f, ok := reportFieldNamed(name); ok {
		return f.unit
	}
	return ""
}

// simulateDoc is simulate()'s documentation: what it does, then each field.
func SimulateDoc() string {
	var b strings.Builder
	b.WriteString("Replays one steady-state step of plan on one GPU and returns its report. print(r) shows a table; " +
		"r.as_dict() is a plain dict for json.encode (the JSON schema of docs/json.md). " +
		"r.save_snapshot(\"step.pickle\") writes the step as a PyTorch memory snapshot (pytorch.org/memory_viz opens it; " +
		"memsh compare reads it) and r.save_trace(\"step.json\") its time as a Perfetto trace (ui.perfetto.dev), " +
		"each a file named relative to the script, inside its folder, written whole or not at all " +
		"(as memsh run --snapshot and --trace do for the last report).\n\nFields:\n")
	for _, f := range ReportFields {
		fmt.Fprintf(&b, "- %s: %s.\n", f.Name, f.Doc)
	}
	return b.String()
}
