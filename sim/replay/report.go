package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// Report is what one simulated step shows for one GPU.
type Report struct {
	Capacity      int64 // device memory as the driver reports it
	PeakAllocated int64 // torch.cuda.max_memory_allocated
	PeakReserved  int64 // torch.cuda.max_memory_reserved (allocator model)
	DeviceUsed    int64 // nvidia-smi: reserved + non-PyTorch memory
	Headroom      int64 // Capacity - DeviceUsed (negative when it does not fit)
	Fits          bool

	Breakdown []Share // at the peak of allocated memory, plus context and fragmentation
	PeakAt    PeakAt
	Largest   Alloc
	OOM       *OOM
	States    States
	Overheads []Overhead // memory outside PyTorch's allocator, each with its source
	Streams   []Share    // each stream the step allocates on: the most its segments reserved at once (streams.go)

	SavedActivations  int64 // held for backward at the end of the forward (storages)
	SavedWeightCopies int64 // autocast low-precision weight copies held for backward
	HostMemory        int64
	HostBreakdown     []Share // host memory by kind
	Traffic           Traffic
	CommBytes         []Share // bytes passed to collectives per step, by kind

	Params          int64 // parameters of the model (unsharded)
	TrainableParams int64
	FLOPs           StepFLOPs
	Time            TimeEstimate

	Timeline []Point
	Trace    *Trace // with core.Options.Trace: the device trace and final segments (trace.go)
	Ranks    []*Report
	Notes    []string
	Tables   []TableStep // per table layer: memory, traffic and transfer terms
	Frag     Fragmentation
	// AllocRetries is how many requests found no room under the card's
	// limit, had the allocator release its cached segments and retried
	// (torch.cuda.memory_stats()["num_alloc_retries"] after the step,
	// alloc.Allocator.Retries; where the first step is replayed before the
	// steady one (lazy_states.go), over both, as the process counts them). Each
	// release is a cudaFree of every cached segment, which synchronises the
	// device. Counted up to and including the OOM.
	AllocRetries int
	// NCCLHeld is the most bytes of freed blocks that waited at once for
	// ProcessGroupNCCL's stream (record_stream on a collective's tensors,
	// core.Runtime.NCCLRecordStreams), taken at each of the host's waits
	// for the device (nccl_record.go); 0 where nothing was recorded.
	NCCLHeld int64

	peakCat    [core.NumCategories]int64
	peakStream [numStreams]streamUse // each stream's bytes at the peak of allocated memory
}

// Share is one category of the breakdown.
type Share struct {
	Name  string
	Bytes int64
}

// PeakAt is where the peak of allocated memory happens.
type PeakAt struct {
	Phase Phase
	Op    string
}

// OOM is the first allocation that does not fit.
type OOM struct {
	Alloc   Alloc
	Message string // in PyTorch's own words
	// The figures the message prints: bytes allocated and reserved by
	// PyTorch when the request failed (after releasing the cache), and in
	// use by the process: reserved plus every term outside the allocator
	// (Report.Overheads).
	Allocated, Reserved, InUse int64
}

// States are the model states per GPU, in the ZeRO paper's sense.
type States struct {
	Params    int64
	Grads     int64
	Master    int64
	Optimizer int64
	Buffers   int64 // module buffers (register_buffer), such as a graph model's edges
}

// Overhead is device memory PyTorch's allocator does not count.
type Overhead struct {
	Name  string
	Bytes int64
	// Where the bytes come from, worded by Source: a text, or what the
	// CUDA context's and an NCCL communicator's texts are worded from
	// (device.go, nccl.go). A search replays hundreds of stages and
	// reads no source: worded at each replay, they were 6.6 % of
	// BenchmarkSearchLlama70B1024's allocations.
	text string
	ctx  contextHow
	nccl ncclComm
}

// Source says where o's bytes come from and how they are made up.
func (o Overhead) Source() string {
	switch {
	case o.nccl.g.name != "":
		return o.nccl.source()
	case o.ctx.on:
		return o.ctx.source()
	}
	return o.text
}

// Traffic is bytes moved per step by link.
type Traffic struct {
	HBM     int64
	PCIe    int64
	NVMe    int64
	Network int64
	// Optimizer is the optimizer step's share of HBM (dense AdamW reads
	// weights, gradients and both moments and writes three; sparse tables
	// count only the rows read).
	Optimizer int64
}

// StepFLOPs counts the work of one step.
type StepFLOPs struct {
	Model     float64 // forward + backward, no recompute (for MFU)
	Hardware  float64 // including recompute (for HFU)
	Recompute float64
}

// TimeEstimate is filled by the time model.
type TimeEstimate struct {
	StepSeconds float64      // one step of the whole job (a pipeline's: all its stages)
	MFU         float64      // model FLOPs (no recompute) over the step and the dense peak, per GPU
	HFU         float64      // the same with recompute
	TokensPerS  float64      // tokens per second over all data-parallel replicas
	Breakdown   []TimeShare  // seconds of the step by cause, summing to StepSeconds
	Modules     []ModuleTime // the step by module, then its terms outside the modules; summing to StepSeconds
	Notes       []string     // assumptions and remarks of the time model
}

// ModuleTime is one row of the step by module (r.modules): the ops of one
// module path with its layer indices folded ("layers.*.mlp.down_proj"),
// or one term of the step outside the modules ("dp_comm", "bubble",
// "optimizer"). Times are seconds per step, FLOPs and bytes per step.
type ModuleTime struct {
	Name      string
	Count     int64   // module instances folded into the row (0 for a step term)
	FLOPs     float64 // forward FLOPs
	Bytes     float64 // forward HBM bytes
	Forward   float64
	Backward  float64
	Recompute float64
	Launch    float64 // CPU dispatch beyond the GPU's work, charged to the module
	Seconds   float64 // the row's share of the step: forward + backward + recompute + launch, or the term
	Bound     string  // compute, memory or launch for a module; the term's kind (comm, bubble, optimizer, host, overhead) otherwise
}

// TimeShare is one line of the time breakdown.
type TimeShare struct {
	Name    string
	Seconds float64
}

// Category returns the breakdown entry by name (0 when absent).
func (r *Report) Category(name string) int64 {
	for _, s := range r.Breakdown {
		if s.Name == name {
			return s.Bytes
		}
	}
	return 0
}

// oomAt builds PyTorch's out-of-memory message for allocation a.
func (r *Replay) oomAt(a Alloc) *OOM {
	f := OOMFigures{
		Tried:       alloc.AllocationSize(a.Bytes),
		Capacity:    r.Plan.Device.Memory,
		NonTorch:    r.Plan.Device.Memory - r.alloc.Limit,
		Allocated:   r.alloc.FailAllocated,
		Reserved:    r.alloc.FailReserved,
		PrivateFree: r.alloc.FailPrivateFree,
		Expandable:  r.Plan.ExpandableSegments,
		Legacy:      r.Plan.Runtime.LegacyOOMMessage,
	}
	a.Phase, a.Op = r.phase, r.op
	return &OOM{Alloc: a, Message: OOMMessage(f), Allocated: f.Allocated, Reserved: f.Reserved, InUse: f.InUse()}
}

// OOMFigures are what PyTorch's out-of-memory message is made of: the
// segment the request needed (Tried), the card's total (Capacity), what
// the process holds outside the allocator (NonTorch), and the allocator's
// allocated and reserved bytes when the request failed, with the free
// blocks of CUDA graph pools (PrivateFree).
type OOMFigures struct {
	Tried, Capacity, NonTorch int64
	Allocated, Reserved       int64
	PrivateFree               int64
	Expandable, Legacy        bool // expandable segments set; PyTorch 1.10-2.0's wording
}

// InUse is what the process holds on the card (NVML's figure, "this
// process has"): reserved plus everything outside the allocator, at most
// the card.
func (f OOMFigures) InUse() int64 { return min(f.Reserved+f.NonTorch, f.Capacity) }

// OOMMessage is PyTorch's out-of-memory message for f
// (c10/cuda/CUDACachingAllocator.cpp, malloc; torch 2.1 and later, or the
// legacy wording of 1.10 to 2.0).
func OOMMessage(f OOMFigures) string {
	inUse := f.InUse()
	free := f.Capacity - inUse
	// A CUDA graph pool's free blocks count as allocated, "in private
	// pools" (CUDACachingAllocator.cpp, malloc: allocated_in_private_pools
	// sums the graph pools' free blocks; the message prints allocated +
	// it, then reserved - allocated - it as unallocated).
	private, privateMsg := f.PrivateFree, ""
	if private > 0 {
		privateMsg = "with " + gib(private) + " allocated in private pools (e.g., CUDA Graphs), "
	}
	if f.Legacy {
		return legacyOOMMessage(f.Tried, f.Capacity, f.Allocated, free, f.Reserved)
	}
	msg := fmt.Sprintf("CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which %s is free. "+
		"Including non-PyTorch memory, this process has %s memory in use. Of the allocated memory %s is allocated by PyTorch, "+
		"%sand %s is reserved by PyTorch but unallocated.",
		gib(f.Tried), gib(f.Capacity), gib(free), gib(inUse), gib(f.Allocated+private), privateMsg, gib(f.Reserved-f.Allocated-private))
	if f.Reserved-f.Allocated-private > f.Capacity/20 && !f.Expandable {
		msg += " If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
	}
	return msg
}

// legacyOOMMessage is the message of PyTorch 1.10 to 2.0
// (c10/cuda/CUDACachingAllocator.cpp at v2.0.0, malloc;
// core.Runtime.LegacyOOMMessage): the same figures, but reserved in total
// rather than reserved but unallocated, and the device's free memory
// (cudaMemGetInfo once the cache went back) rather than this process's
// use.
func legacyOOMMessage(tried, capacity, allocated, free, reserved int64) string {
	return fmt.Sprintf("CUDA out of memory. Tried to allocate %s (GPU 0; %s total capacity; %s already allocated; %s free; %s reserved in total by PyTorch) "+
		"If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  "+
		"See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
		gib(tried), gib(capacity), gib(allocated), gib(free), gib(reserved))
}

// gib formats bytes as PyTorch's OOM message does (format_size in
// CUDACachingAllocator.cpp): bytes up to 1024, then KiB up to 1 MiB, MiB
// up to 1 GiB, else GiB, with two decimals (1 MiB prints as 1024.00 KiB).
func gib(n int64) string {
	switch {
	case n <= 1024:
		return fmt.Sprintf("%d bytes", n)
	case n <= 1<<20:
		return fmt.Sprintf("%.2f KiB", float64(n)/1024)
	case n <= 1<<30:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

// Fragmentation is why the reserve exceeds the allocated bytes: what the
// allocator held in free blocks when allocated memory peaked, and the
// request that grew the reserve to its peak while cached blocks could not
// serve it.
type Fragmentation struct {
	AtPeak     [2]alloc.Cache // free blocks at the peak of allocated memory: small pool, large pool
	PeakGrowth *PeakGrowth    // nil when the reserve never grew past the setup (or a pool was released)
}

// PeakGrowth is the request after which the reserve reached its peak.
type PeakGrowth struct {
	Alloc    Alloc
	Growth   alloc.Growth // its pool's free blocks then, none large enough, and the other pool's
	Reserved int64        // the reserve after it
	parts    allocParts   // what Alloc's description lacks until the replay's finish joins it
}

// settle joins the description of the request (Replay.finish).
func (g *PeakGrowth) settle() {
	if g != nil {
		g.Alloc, g.parts = g.parts.join(g.Alloc), allocParts{}
	}
}
