package jsondoc

import "encoding/json"

// Version is the schema version written in every Doc.
const Version = 1

// Kinds of Doc.
const (
	KindReport = "report" // Report is set
	KindValue  = "value"  // Value is set: any JSON-encodable Starlark value
	KindTable  = "table"  // Table is set: a table from sweep() or search()
	KindCheck  = "check"  // Check is set: memsh check's verdict
	KindError  = "error"  // Error is set: why memsh fit --json stopped
)

// Doc is one line of `memsh run --json`.
type Doc struct {
	Version int    `json:"version"`         // schema version, Version
	Kind    string `json:"kind"`            // KindReport, KindTable, KindValue, KindCheck or KindError
	Label   string `json:"label,omitempty"` // emit(x, label=...)
	// At is where the value came from: "file:line:col" of the emit()
	// call, or of the main() definition for its results.
	At     string          `json:"at"`
	Report *Report         `json:"report,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`
	Table  *Table          `json:"table,omitempty"`
	Check  *Check          `json:"check,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is why a command with --json stopped, as it printed it on
// stderr: memsh fit's last document ("kind": "error", Exit set), memsh
// check's verdict when it exits 2 (Check.Error; Check.Exit holds the
// code).
type Error struct {
	Message string `json:"message"`        // the error, without "error:"
	Hint    string `json:"hint,omitempty"` // what to do, when memsh knows
	// At is where the error is: "file:line:col" of a script, "file:line"
	// of a config's key; absent when it is the command line's.
	At   string `json:"at,omitempty"`
	Exit int    `json:"exit,omitempty"` // the exit code (kind "error" only)
}

// Check is memsh check's verdict, its last line: the config, what its
// importer left out, and whether the step passed the gate.
type Check struct {
	Config        string            `json:"config"`
	Trainer       string            `json:"trainer"`
	NotUnderstood []string          `json:"not_understood"`         // keys left out of the plan
	DidYouMean    map[string]string `json:"did_you_mean,omitempty"` // a key of not_understood -> the key read that it is likely a typo of
	NotModelled   []string          `json:"not_modelled"`           // "key: why"
	ModelFrom     string            `json:"model_from,omitempty"`   // where the model's config.json was found when --model gave none
	Pass          bool              `json:"pass"`                   // fits with headroom_asked free
	HeadroomAsked float64           `json:"headroom_asked"`         // --headroom, a fraction
	Free          *float64          `json:"free"`                   // the card's share left free at the peak; null when no step was replayed (exit 2)
	Exit          int               `json:"exit"`                   // the exit code: 0 pass, 1 not, 2 a usage, config or plan error
	Error         *Error            `json:"error,omitempty"`        // why, on exit 2
}

// Table is a table of results from sweep() or search(): its columns of
// plain values (plans and reports are left out), row by row.
type Table struct {
	Title   string   `json:"title"`
	Columns []string `json:"columns"` // in order: the keys of every row
	// Units maps a column to "bytes" (an int), "seconds" or "fraction"
	// (0..1), for the columns that have one.
	Units map[string]string `json:"units"`
	// Rows are objects of column -> value (null where a row has none), as
	// t.as_dicts() gives them.
	Rows  []map[string]json.RawMessage `json:"rows"`
	Notes []string                     `json:"notes"`
	// Chart is what memsh plot draws: emit(t, x=, y=, by=, pareto=) or
	// the defaults; absent for a table with no two numeric columns.
	Chart *Chart `json:"chart,omitempty"`
}

// Chart is the chart of a table.
type Chart struct {
	X      string `json:"x"`            // the column on the x axis
	Y      string `json:"y"`            // the column on the y axis
	By     string `json:"by,omitempty"` // the column splitting rows into series
	Pareto bool   `json:"pareto"`       // the Pareto front of x and y is highlighted
}

// Report is one simulated step on one GPU (docs/json.md: the fields), as
// r.as_dict() gives it.
type Report struct {
	Model string `json:"model"` // model name
	GPU   string `json:"gpu"`   // device name
	Plan  string `json:"plan"`  // the plan as Starlark: train(model="...", batch=8, ...)

	Fits          bool  `json:"fits"`           // device_used <= capacity and no allocation failed
	PeakAllocated int64 `json:"peak_allocated"` // torch.cuda.max_memory_allocated
	PeakReserved  int64 `json:"peak_reserved"`  // torch.cuda.max_memory_reserved
	DeviceUsed    int64 `json:"device_used"`    // nvidia-smi: reserved + memory outside PyTorch's allocator
	Capacity      int64 `json:"capacity"`       // device memory as PyTorch sees it (total_memory)
	SMITotal      int64 `json:"smi_total"`      // memory.total as nvidia-smi shows it: capacity + the driver's reserve
	Headroom      int64 `json:"headroom"`       // capacity - device_used; negative when it does not fit
	// AllocRetries is torch.cuda.memory_stats()["num_alloc_retries"]: the
	// requests retried after the allocator released its cache at the
	// card's limit (up to the OOM).
	AllocRetries int `json:"alloc_retries"`

	// Breakdown is device_used by cause, summing to it: params, grads,
	// optimizer, activations, temporaries, comm (at the peak of allocated
	// memory, summing to PeakAllocated), fragmentation, the cache of each
	// side stream (all_gather_stream, reduce_scatter_stream,
	// offload_stream, shared_expert_stream, pre_unshard_stream), cuda_graph_pool (compile_mode="reduce-overhead"),
	// each term outside PyTorch's allocator by name
	// (cuda_context, nccl_dp, ...), paged_optimizer, reserved_later.
	Breakdown     map[string]int64 `json:"breakdown"`
	Fragmentation Fragmentation    `json:"fragmentation"`
	PeakAt        PeakAt           `json:"peak_at"`
	Largest       Alloc            `json:"largest"` // the largest single allocation
	OOM           *OOM             `json:"oom"`     // null, or the first allocation that does not fit
	States        States           `json:"states"`

	SavedActivations  int64 `json:"saved_activations"`   // held for backward at the end of the forward
	SavedWeightCopies int64 `json:"saved_weight_copies"` // autocast weight copies held for backward
	HostMemory        int64 `json:"host_memory"`
	// HostBreakdown is host_memory by what holds it, summing to it.
	HostBreakdown map[string]int64 `json:"host_breakdown"`
	Traffic       Traffic          `json:"traffic"`

	// The time model; null when it could not run (a GPU without
	// throughput figures).
	StepTime    *float64 `json:"step_time"`     // seconds per optimizer step
	MFU         *float64 `json:"mfu"`           // model FLOPs utilisation, 0..1
	HFU         *float64 `json:"hfu"`           // hardware FLOPs utilisation (with recompute), 0..1
	TokensPerS  *float64 `json:"tokens_per_s"`  // tokens per second over all data-parallel replicas; null for a weather model
	SamplesPerS *float64 `json:"samples_per_s"` // samples (sequences, or a weather model's input states) per second
	CommBytes   *int64   `json:"comm_bytes"`    // bytes over the network per step
	// TimeBreakdown is the step's seconds by cause (r.time_breakdown):
	// forward, backward, recompute, launch, exposed communication, the
	// bubble, the optimizer, host terms; null without a time model.
	TimeBreakdown map[string]float64 `json:"time_breakdown"`
	// Modules is the step by module, then its terms outside the modules
	// (r.modules); null without a time model.
	Modules []Module `json:"modules"`

	Params          int64 `json:"params"`           // parameters of the model
	TrainableParams int64 `json:"trainable_params"` // of which trainable

	// Tables has one object per embedding table of the model (table()),
	// as r.tables gives them.
	Tables []json.RawMessage `json:"tables"`

	Notes    []string `json:"notes"`              // remarks of the engine
	Ranks    []Report `json:"ranks"`              // per pipeline stage, when there are several
	Timeline []Point  `json:"timeline,omitempty"` // with simulate(plan, timeline=True)
}

// Module is one row of the step by module (docs/time.md): a module path
// with its layer indices folded, or a term of the step outside the
// modules. Seconds, FLOPs and bytes are per step; the rows' seconds add up
// to step_time.
type Module struct {
	Name      string  `json:"name"`      // "layers.*.mlp.down_proj", or "dp_comm", "bubble", "optimizer", ...
	Count     int64   `json:"count"`     // module instances folded into the row; 0 for a step term
	FLOPs     float64 `json:"flops"`     // forward FLOPs
	Bytes     float64 `json:"bytes"`     // forward HBM bytes
	Forward   float64 `json:"forward"`   // seconds
	Backward  float64 `json:"backward"`  // seconds
	Recompute float64 `json:"recompute"` // seconds
	Launch    float64 `json:"launch"`    // CPU dispatch beyond the GPU's work, seconds
	Seconds   float64 `json:"seconds"`   // the row's share of the step
	Bound     string  `json:"bound"`     // compute, memory, launch; comm, bubble, optimizer, host or overhead for a step term
}

// Fragmentation is why the reserve exceeds the allocated bytes.
type Fragmentation struct {
	FreeBlocks  int         `json:"free_blocks"`  // free blocks cached at the peak of allocated memory
	FreeBytes   int64       `json:"free_bytes"`   // their bytes: the breakdown's fragmentation
	LargestFree int64       `json:"largest_free"` // the largest of them
	PeakGrowth  *PeakGrowth `json:"peak_growth"`  // null, or the request after which the reserve peaked
}

// PeakGrowth is the request after which the reserve reached its peak,
// and what its pool cached then.
type PeakGrowth struct {
	Tensor        string `json:"tensor"`
	Op            string `json:"op"`
	Phase         string `json:"phase"`
	Bytes         int64  `json:"bytes"`          // the request, rounded to 512 B
	CachedBlocks  int    `json:"cached_blocks"`  // free blocks in its pool then
	CachedBytes   int64  `json:"cached_bytes"`   // their bytes
	LargestCached int64  `json:"largest_cached"` // the largest: smaller than the request
	Reserved      int64  `json:"reserved"`       // the reserve after it
}

// PeakAt is where the peak of allocated memory happens.
type PeakAt struct {
	Phase string `json:"phase"` // setup, forward, recompute, backward or optimizer
	Op    string `json:"op"`    // the module path and op, "layers.3.attn.q_proj"
}

// Alloc is one allocation of the step.
type Alloc struct {
	Tensor string  `json:"tensor"`
	Op     string  `json:"op"`
	Shape  []int64 `json:"shape"`
	DType  string  `json:"dtype"` // fp32, bf16, ...
	Bytes  int64   `json:"bytes"`
	Why    string  `json:"why"` // why the tensor exists
	Phase  string  `json:"phase"`
}

// OOM is the first allocation that does not fit, and PyTorch's message.
type OOM struct {
	Alloc
	Message string `json:"message"` // "CUDA out of memory. Tried to allocate 10.37 GiB. ..."
}

// States are the model states per GPU, at their fullest in the step.
type States struct {
	Params    int64 `json:"params"`
	Grads     int64 `json:"grads"`
	Master    int64 `json:"master"`
	Optimizer int64 `json:"optimizer"`
	Buffers   int64 `json:"buffers"` // module buffers (a graph model's edges and node coordinates)
}

// Traffic is bytes moved per step, by link.
type Traffic struct {
	HBM     int64 `json:"hbm"`
	PCIe    int64 `json:"pcie"`
	NVMe    int64 `json:"nvme"`
	Network int64 `json:"network"`
}

// Point is the state after one allocation or free of the step: allocated
// and reserved bytes, and allocated bytes by category.
type Point struct {
	Phase       string `json:"phase"`
	Op          string `json:"op"`
	Allocated   int64  `json:"allocated"`
	Reserved    int64  `json:"reserved"`
	Params      int64  `json:"params"`
	Grads       int64  `json:"grads"`
	Optimizer   int64  `json:"optimizer"`
	Activations int64  `json:"activations"`
	Temporaries int64  `json:"temporaries"`
	Comm        int64  `json:"comm"`
}
