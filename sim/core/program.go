package core

import "github.com/memsh/memsh/sim/units"

// The forward program: what a model's layers lower to for one micro-batch.
// The replay (replay/replay.go) turns it into a timeline of allocations and frees.

// Category is where a tensor's bytes go in a report's breakdown.
type Category uint8

const (
	CatParams      Category = iota // parameters and their low-precision working copies
	CatGrads                       // parameter gradients
	CatOptimizer                   // optimizer state and master weights
	CatActivations                 // forward tensors (held for backward or in flight)
	CatTemporaries                 // activation gradients, workspaces, optimizer temporaries
	CatComm                        // communication buffers (gathers, buckets)
	NumCategories
)

var categoryNames = [NumCategories]string{"params", "grads", "optimizer", "activations", "temporaries", "comm"}

func (c Category) String() string { return categoryNames[c] }

// CategoryNames lists the categories in report order.
func CategoryNames() []string { return categoryNames[:] }

// Value is a forward tensor (one storage) in a program.
type Value int32

const NoValue Value = -1

// valueInfo describes one storage produced in the forward.
type ValueInfo struct {
	Name     string  // module path and tensor name, "layers.3.attn.q"
	Shape    []int64 // logical shape
	Dtype    units.DType
	Bytes    int64
	Grad     bool     // requires grad (a gradient of this size exists in backward)
	Cat      Category // CatActivations, or CatParams for weight copies
	Producer int32    // op index, -1 for the program input
	Why      string   // why it exists, for r.largest
	Cached   bool     // held until the end of the forward (autocast weight cache)
	Fused    bool     // computed inside a fused kernel of a compiled graph: never in memory (partition.go)
	// GradDType: the gradient's dtype when not Dtype (InvalidDType: the
	// same): torchao's fp8 input gathered under tensor parallelism, whose
	// gradient is the compute dtype's (float8_tp.go).
	GradDType units.DType
	// Routed: the value's leading dimension is the routed rows one MoE
	// layer's experts receive in one micro-batch (the dispatch
	// all-to-all's output and what the experts make of it), whose count
	// real routing changes every micro-batch and layer (routing.go). 0:
	// not routed; k > 0: the layer's first routed value is k-1 values
	// before this one (relative, so a copied block keeps it).
	Routed int32
}

// GradBytes is the size of v's gradient: its bytes, or its elements in
// GradDType.
func (v *ValueInfo) GradBytes() (units.DType, int64) {
	if v.GradDType == units.InvalidDType || v.GradDType == v.Dtype {
		return v.Dtype, v.Bytes
	}
	return v.GradDType, v.GradDType.Bytes(Numel(v.Shape))
}

// Role is what a parameter is in its module: the projection of an
// attention or MLP (q, k, v, o, gate, up, down), the embedding, the output
// head, a norm, a router, an adapter. LoRA targets, quantization and
// freezing select parameters by role; expert weights carry the expert_
// prefix (expert_gate).
type Role string

// ParamInfo is one parameter tensor (per rank, after sharding).
type ParamInfo struct {
	Name      string
	Shape     []int64
	Numel     int64 // elements held by this rank
	FullNumel int64 // elements in the unsharded tensor
	Trainable bool
	Role      Role   // what the parameter is in its module (LoRA targets, quantization, freezing)
	TiedTo    int32  // index of the parameter this one shares storage with, or -1
	Quant     string // bitsandbytes scheme of a quantized frozen weight, "" when stored in the params dtype
	// DType: the dtype the parameter, its gradient and its optimizer
	// state are stored in when not the plan's (InvalidDType): PEFT's fp32
	// LoRA adapters over a bf16 model (Plan.AdapterDType).
	DType units.DType
	// StageCopy: a pipeline stage's copy of a weight another stage owns
	// (the tied output head on the last stage, a copy of the first stage's
	// embedding kept equal by an all-reduce of their gradients: Megatron's
	// embedding group). It holds memory and trains here, but the model's
	// parameter count has it once.
	StageCopy bool
	GatherFP8 bool // a float8 linear's weight FSDP2 all-gathers in fp8 (float8.go), or a TE linear's fp8 primary weight (te_fp8_params.go)
	// Reference: a weight of DPO's reference copy (dpo.go), read only by
	// its forward under no_grad: ZeRO-3 gathers it there and never in the
	// backward (its engine is the reference's own).
	Reference bool
	// MXFP8Storage: a TE linear's MXFP8 primary weight, stored as the module's
	// MXFP8 buffers, not in the parameter buffer (te_fp8_params.go).
	MXFP8Storage bool
	// Unrouted: an expert's parameter no token reached in the replayed
	// step (IdleLinear). It gets no gradient in this step, but the
	// routing of the steps before reached it: its optimizer state exists
	// (replay's noStateParams).
	Unrouted bool
	// Unread: no op of the program reads the parameter (nor its tied
	// copy): a tower the step does not run (a vision tower without
	// images, Gemma 4's audio tower). FSDP2 and ZeRO-3 never gather or
	// reduce it (replay's comm.go); set when the lowering ends
	// (Program.markUnread).
	Unread bool
}

// opInfo is one forward op.
type OpInfo struct {
	Name    string // "layers.3.attn.q_proj"
	Module  string // the module path it runs in: "layers.3.attn.q_proj", "layers.3.input_layernorm" for its pow
	Kind    string // "matmul", "softmax", "scatter", ...
	In      []Value
	Out     []Value
	Saved   []Value // storages autograd keeps for this op's backward
	Params  []int32 // parameters read (their grads are produced in backward)
	WorkF   int64   // transient workspace in forward
	WorkB   int64   // transient workspace in backward (beyond input grads)
	Flops   float64 // forward FLOPs (backward is costed by op kind)
	Bytes   float64 // forward HBM bytes moved
	Region  int32   // checkpoint region id, 0 = none
	Block   int32   // the repeated block it belongs to, 1-based, 0 = none (checkpoint budgets)
	NoGradB bool    // backward produces no input grads (e.g. integer inputs)
	// SideStream: the op runs on a side stream of its own (Megatron's
	// overlapped shared expert, nn/moe.go): what it and its backward
	// allocate comes from that stream's pools in the caching allocator.
	SideStream bool
	// NCCLStream: the op is a torch.distributed collective that
	// ProcessGroupNCCL runs on its own stream and, on a runtime that records
	// streams (Runtime.NCCLRecordStreams), record_stream's its input and
	// output there, forward and backward: Megatron-Core's all-to-all
	// (tensor_parallel/mappings.py _AllToAll, all_to_all_single with
	// async_op=False). Their blocks, once freed, wait for the NCCL stream
	// (replay/nccl_record.go).
	NCCLStream bool
	// WorkBParts: WorkB is this many tensors of equal size, allocated one
	// after another (0 or 1: one tensor).
	WorkBParts int32
	// Work, when set, lists the tensors the workspaces are (bytes each,
	// summing to WorkF and WorkB), allocated in that order and released
	// together; unset, each workspace is one tensor (WorkBParts aside).
	Work *WorkTensors
	// Keep: the checkpoint policy keeps this op's outputs from the forward
	// (selective checkpointing's MUST_SAVE); its region's recomputation
	// takes them instead of running the op (checkpoint_policy.go).
	Keep bool
	// BwdStream: HBM bytes the backward moves besides its GEMMs, in
	// BwdStreamK kernels (a float8 linear's casts and layout copies).
	BwdStream  float64
	BwdStreamK int32
	// GradsInForward: the op made its input's and parameters' gradients
	// in the forward and saved them (Liger's fused linear cross-entropy,
	// liger.go), or its backward writes its inputs' gradients into the
	// tensors it saved (Liger's SwiGLU, liger_layers.go); the saved
	// tensors go as the gradients take their place (the same bytes).
	GradsInForward bool
	// ScaledMM: the op is torch._scaled_mm (a float8 linear), which runs
	// on cuBLASLt in its forward and its backward (cublas.go, CublasLt).
	ScaledMM bool
	// TEGemm: the op is a Transformer Engine linear's GEMM under
	// Megatron's runtime (megatron_te.go): its bias epilogue runs in TE's
	// cuBLASLt call on TE's own workspace, not on PyTorch's handles; on
	// a grouped_matmul, TE's GroupedLinear in bf16 (Megatron-Core's
	// TEGroupedMLP), whose grouped GEMM takes TE's per-stream workspaces
	// (te_grouped.go teGroupedSeen).
	TEGemm bool
	// GradInPlace: the backward writes its input's gradient into its
	// output's gradient (Liger's RMSNorm, in_place=True): the input's
	// gradient takes that storage, nothing new is allocated for it.
	GradInPlace bool
	// savesDropped: Builder.Save was called while none of the op's outputs
	// required grad, so it saved nothing: an output requiring grad added
	// after it is a lowering that saved too early (Builder.Out).
	savesDropped bool
	// SortedIndex: a gather's index is sorted, so consecutive rows read
	// the same source row from L2 (PyG's x_i at the destination index of
	// an edge list grouped by destination; timing/graph.go).
	SortedIndex bool
	// Strided: the op's last input is a strided view (transformers 5's
	// gate and up, the two halves of gate_up's chunk(2, dim=-1) in the
	// grouped_mm experts, nn/moe_hf.go): TensorIterator cannot vectorize
	// it, so the kernels that read it run its generic elementwise kernel
	// (timing/strided.go).
	Strided bool
	// Syncs: host syncs the op's forward makes, the host reading a device
	// value (a tensor's truth value or .item(), nonzero's count in
	// torch.where and boolean indexing, a 0-dim CUDA tensor used as an
	// index): each waits until the device has run everything launched
	// before it (timing/host_sync.go prices the wait).
	Syncs int32
	// AtenF and AtenB: the aten ops the forward and the backward of a
	// group of ops dispatch on the host, where that count is known as a
	// whole (one pass of transformers 5's per-expert MoE loop,
	// nn/moe_loop.go), set on the group's first op and priced at the
	// host's measured time per aten op instead of the group's kernel
	// launches (timing/host_ops.go); HostGrouped marks the group's other
	// ops, whose host time is in that count.
	AtenF, AtenB int32
	HostGrouped  bool
	// WeightGradFirst: the op is a linear's matmul in a compiled graph,
	// whose backward computes the weight's gradient before the input's
	// and frees the saved input in between (partition.go, weightGradFirst).
	WeightGradFirst bool
	// FakeQuant: the op is a step of one of torchao's fake quantizers
	// (qat.go), whose backward timing prices by autograd's own rule
	// (timing/fake_quant.go).
	FakeQuant bool
	// Varlen: the op is flash-attn's varlen kernel over the documents of
	// Program.Docs, each its own sequence (timing prices each document at
	// its own length).
	Varlen bool
}

// WorkTensors are an op's workspaces as the tensors PyTorch allocates
// for them: in the caching allocator each takes a block of its own, so a
// large workspace made of several tensors fits where one lump would not.
type WorkTensors struct {
	F, B []int64
}

// Forward is the forward workspace's tensors, nil for one tensor.
func (w *WorkTensors) Forward() []int64 {
	if w == nil {
		return nil
	}
	return w.F
}

// Backward is the backward workspace's tensors, nil for the default.
func (w *WorkTensors) Backward() []int64 {
	if w == nil {
		return nil
	}
	return w.B
}

// program is the lowered forward of one micro-batch.
type Program struct {
	Values  []ValueInfo
	Ops     []OpInfo
	Params  []ParamInfo
	Buffers []bufferInfo // module buffers, on the device with the parameters
	Input   Value
	// inputTransient: the caller drops the input after its last use (a
	// validation batch replaced by its normalised copy; data_batch.go).
	InputTransient bool
	// Labels: the batch's targets a cross-entropy reads (Builder.Labels),
	// loaded with the input and held by the caller for the step; NoValue
	// when no loss reads labels.
	Labels Value
	// BatchExtra are the batch's other tensors a step reads, loaded and
	// held as the input is (KTO's KL_input_ids, kto.go).
	BatchExtra []Value
	Loss       Value
	Regions    []Region // checkpoint regions, index = id-1
	// Docs are the packed row's documents' lengths (Plan.Docs) that a
	// Varlen attention op runs one by one; nil when none are given.
	Docs   []int64
	Graphs []Graph        // compiled graphs (compile.go)
	Tables []TableProgram // table layers (package replay: replay/table.go), set up and stepped by the replay
	Held   []Value        // kept alive by the caller until the step ends (a training loop's logits list; chunked_loss.go)
	// HeldBackward: kept alive by the caller through the backward and
	// dropped before the optimizer step (keep_logits: the loop's out.logits).
	HeldBackward []Value
	// HeldForward: kept alive by the model's output to the end of the
	// forward and dropped before the backward (use_cache: the DynamicCache's
	// keys and values, when the loop does not keep the output).
	HeldForward []Value
	// Float8Skipped: the linears float8 left in high precision for a
	// dimension not divisible by 16, as "name (in -> out)", once per
	// name and shape (float8.go).
	Float8Skipped []string
	// QuantSkipped: the MoE blocks whose experts quant= did not reach, by
	// module path, once each: 3-D (fused or grouped) expert weights, which
	// bitsandbytes' Linear4bit/Linear8bitLt replacement of nn.Linear
	// modules never sees (nn/moe.go), so they stay in the params dtype.
	QuantSkipped []string
	// QuantSkippedAlways: some of them are 3-D in every transformers
	// release (Llama 4's, nn.MoEDenseBMM), not only from 5.0.
	QuantSkippedAlways bool
	// LigerKernels: some op runs one of Liger's layer kernels
	// (liger_layers.go); false under train(liger_kernels=True) means the
	// program has no RMSNorm or SwiGLU MLP for them to replace.
	LigerKernels bool
	Comm         []CommRecord // collectives of one micro-batch
	// SymmMemWorkspace: async TP's symmetric-memory workspace, the largest
	// request of its fused collectives (async_tp.go), outside the caching
	// allocator; 0 without async TP.
	SymmMemWorkspace int64
	Stage            *stageProg // pipeline stage: micro-batch copies and their outputs
}

// TableProgram is what a table layer adds to a program: the rows it reads,
// its sparse gradients and row-wise optimizer state, which the replay sets
// up and steps itself rather than through the ops (package replay,
// replay/table_replay.go).
type TableProgram interface {
	TableName() string
}

// reserve makes room in the program's lists for n more copies of what was
// appended since they held ops, values, params and comm entries (the
// first copy of a repeated block), within the caps on ops and parameter
// tensors, so that a long repeat does not regrow and copy them again and
// again (the collectives too: appended one block at a time, a pipeline
// stage's were 331 of the 405B search's 2,281 MB of stage lowering). A
// list without that room gets tail entries more, for what follows (a
// repeat's: a final norm, the head, the loss; without them the loss of a
// 65,536-layer stack of linears copied its 65,537 ops again).
func (p *Program) reserve(n int64, tail int, ops, values, params, comm int) {
	more := func(have, since, room, limit int) int {
		need := min(max(n, 0)*int64(have-since), int64(max(limit-have, 0)))
		if int64(room) >= need {
			return 0
		}
		return int(min(need+int64(tail), int64(limit-have)))
	}
	p.Ops = grow(p.Ops, more(len(p.Ops), ops, cap(p.Ops)-len(p.Ops), maxOps))
	p.Values = grow(p.Values, more(len(p.Values), values, cap(p.Values)-len(p.Values), 4*maxOps))
	p.Params = grow(p.Params, more(len(p.Params), params, cap(p.Params)-len(p.Params), maxParamTensors))
	p.Comm = grow(p.Comm, more(len(p.Comm), comm, cap(p.Comm)-len(p.Comm), 4*maxOps))
}

// grow is slices.Grow(s, n) that copies only s's elements: slices.Grow
// appends n zero elements and cuts them off again, and under the race
// detector that copy is checked byte by byte (Repeat's room for 65,535
// more blocks of ops: 29 MB read and written, 6 % of the FuzzSizes
// repeat_65536 inputs' time under -race). It makes an eighth more room
// than asked, as append's size classes do: what follows a reserve (a
// pipeline stage reserves no tail) then fits, and with exactly n the
// search's BenchmarkEvaluateLlama70B3D copied its lists again (6.93 ->
// 7.86 MB/op, 11,270 -> 13,690 allocs/op; 7.11 MB and 11,277 with it).
func grow[T any](s []T, n int) []T {
	if n <= 0 || cap(s)-len(s) >= n {
		return s
	}
	out := make([]T, len(s), len(s)+n+n/8)
	copy(out, s)
	return out
}

// reserveTail is the entries Repeat's reserve adds to each list for what
// follows the repeat.
const reserveTail = 64

// ProgramSize is the lengths of a program's op, value and parameter
// lists.
type ProgramSize struct{ Ops, Values, Params int }

// Size is p's ProgramSize.
func (p *Program) Size() ProgramSize { return ProgramSize{len(p.Ops), len(p.Values), len(p.Params)} }

// Times is s with every length multiplied by k.
func (s ProgramSize) Times(k int) ProgramSize {
	return ProgramSize{k * s.Ops, k * s.Values, k * s.Params}
}

// region is a contiguous range of ops run under activation checkpointing.
type Region struct {
	name       string
	First, End int32 // ops [first, end)
	Reentrant  bool  // torch.utils.checkpoint(use_reentrant=True)
	// WholeRecompute: the recompute runs the whole region's forward, as a
	// reentrant one does, though the replay keeps what it saves as a
	// non-reentrant one (Megatron's CheckpointFunction, Checkpoint.
	// NoEarlyStop; RecomputeEnd).
	WholeRecompute bool
	NoGrad         bool // no graph is recorded: reentrant with no input requiring grad, or non-reentrant with no output requiring it
	// Offload: the region's module runs under save_on_cpu inside its
	// checkpoint (anemoi's cpu_offload, offload_wrapper): the innermost
	// saved-tensor hooks win, so every tensor its ops save is copied to
	// pinned host memory and back, nothing is recomputed, and the
	// checkpoint keeps only its inputs on the GPU (_NoopSaveInputs saves
	// them outside the offload hooks).
	Offload bool
	// Parent is the enclosing region (1-based; 0: none) of a nested
	// checkpoint (Builder.BeginNestedRegion).
	Parent int32
}

// Ancestors lists region id (1-based) and the regions enclosing it,
// innermost first.
func (p *Program) Ancestors(id int32) []int32 { return p.AppendAncestors(nil, id) }

// AppendAncestors appends Ancestors(id) to dst: a caller that passes room
// on its stack allocates nothing (the replay asks at every op of a
// checkpointed region, hundreds of thousands of times in a long stack).
func (p *Program) AppendAncestors(dst []int32, id int32) []int32 {
	for ; id != 0; id = p.Regions[id-1].Parent {
		dst = append(dst, id)
	}
	return dst
}

// Depth is how many checkpoint regions enclose op i: the times a training
// step's backward runs its forward again (nested non-reentrant checkpoints
// recompute an inner region once per enclosing region: PyTorch's
// torch/utils/checkpoint.py supports nesting this way). Offloaded regions
// recompute nothing.
func (p *Program) Depth(i int) int {
	n := 0
	for id := p.Ops[i].Region; id != 0; id = p.Regions[id-1].Parent {
		if !p.Regions[id-1].Offload {
			n++
		}
	}
	return n
}

// The roles of the layers every model shares; layer kinds of their own
// (graph models, tables, BERT's heads) name theirs where they lower.
const (
	RoleQ        Role = "q"
	RoleK        Role = "k"
	RoleV        Role = "v"
	RoleO        Role = "o"
	RoleQKV      Role = "qkv" // a fused q, k and v projection
	RoleGate     Role = "gate"
	RoleUp       Role = "up"
	RoleDown     Role = "down"
	RoleEmbed    Role = "embed"
	RoleLMHead   Role = "lm_head"
	RoleNorm     Role = "norm"
	RoleRouter   Role = "router"
	RoleAdapter  Role = "adapter"   // adapter weights that stay trainable under LoRA
	RoleLoRA     Role = "lora"      // LoRA's A and B
	RoleNormLoRA Role = "norm-lora" // norms LoRA trains too (LitGPT's adapter-v2)
	RoleLinear   Role = "linear"    // a linear without a more specific role
	// RoleConv is a convolution lowered as the matmul it is (a vision
	// tower's patch embedding, a Conv2d with stride = kernel): PEFT's
	// "all-linear", bitsandbytes and torchao's float8 reach nn.Linear
	// modules only, so it gets no adapter, stays unquantized and in its
	// dtype.
	RoleConv Role = "conv"
	// RoleConvLeaf is a convolution that LoRA's all-linear reaches by its
	// leaf name: on a model whose targets PEFT converts (lora_experts.go)
	// all-linear becomes the leaf names of every nn.Linear, and a
	// convolution of the same leaf name gets PEFT's lora.Conv2d or Conv3d
	// (GLM-4.5V's patch_embed.proj, its blocks' attn.proj being
	// nn.Linear; Builder.AllLinearByLeaf). Quantization and float8 leave
	// it as they leave RoleConv.
	RoleConvLeaf Role = "conv-leaf"
)

// BatchValues are the tensors the caller loads as the step's batch: the
// input, for a cross-entropy the labels, and the batch's other tensors.
func (p *Program) BatchValues() []Value {
	var out []Value
	for _, v := range []Value{p.Input, p.Labels} {
		if v != NoValue {
			out = append(out, v)
		}
	}
	return append(out, p.BatchExtra...)
}
