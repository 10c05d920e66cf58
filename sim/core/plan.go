package core

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// Phase is what a plan replays: a training step, or an evaluation forward
// (no gradients, dropout off, eval chunk counts).
type Phase uint8

// The phases of a plan.
const (
	Train Phase = iota
	Eval
)

// String is the phase as train() takes it: "train" or "eval".
func (p Phase) String() string {
	if p == Eval {
		return "eval"
	}
	return "train"
}

// ParsePhase reads a phase name.
func ParsePhase(name string) (Phase, error) {
	switch name {
	case "train":
		return Train, nil
	case "eval":
		return Eval, nil
	}
	return 0, fmt.Errorf("unknown phase %q (known: train, eval)", name)
}

// Plan is a training (or evaluation) step to simulate.
type Plan struct {
	Model       *Model
	Batch       int64 // micro-batch, sequences per GPU per forward
	Seq         int64 // tokens per sequence (the padded length)
	GradAccum   int64
	Members     int64  // ensemble members (graph models)
	Images      Images // images per sample of a vision-language model (images.go)
	Videos      Videos // videos per sample of a vision-language model (videos.go)
	MembersMode string // stacked | sequential | spread (members.go)
	Precision   Precision
	Optimizer   Optimizer
	Checkpoint  Checkpoint
	Compile     Compile // torch.compile of the blocks and the loss (compile.go)
	Float8      Float8  // torchao's float8 linears (float8.go)
	QAT         QAT     // torchao's fake-quantized linears, quantization-aware training (qat.go)
	LoRA        *LoRA
	Quant       string // "", nf4, nf4-dq, int8 (bitsandbytes), torchao-nf4 (frozen base weights)
	Device      hw.Device
	Phase       Phase // Train, or Eval: a forward without gradients
	Runtime     Runtime
	Parallel    Parallelism // distributed layout; zero value = one GPU
	Cluster     hw.Cluster  // the machines; zero value = 8-GPU nodes

	// Fine-tuning and memory savers (finetune.go).
	QuantLMHead    bool        // quantize lm_head too (Lightning's BitsandbytesPrecision); transformers keeps it 16-bit
	QuantExperts   bool        // 3-D MoE expert weights quantized too, dequantized on each forward (Axolotl's quantize_moe_experts: quant_experts.go)
	QuantFrom      units.DType // dtype the weights were quantized from (dequantize returns it); InvalidDType = compute dtype
	QuantStorage   units.DType // bnb_4bit_quant_storage: the dtype holding the 4-bit codes; InvalidDType = uint8 (quant_shard.go)
	Freeze         []string    // frozen modules by path prefix, role or "all"
	Trainable      []string    // the only parameters that train, by regular expressions over their names (trainable.go); nil: all
	LossChunks     int64       // chunked lm_head + cross-entropy, torchtune's num_output_chunks
	FusedLoss      string      // Liger's fused linear cross-entropy, a LigerVersions name (liger.go); "" = none
	LigerKernels   bool        // Liger's RMSNorm and SwiGLU kernels in place of the eager layers (liger_layers.go)
	KbitPrep       bool        // PEFT's prepare_model_for_kbit_training: the plan is evaluated as KbitPrepared (kbit.go)
	TokensPerBatch int64       // packed sequences: one row of this many tokens instead of batch x seq
	DocTokens      int64       // mean tokens a packed document: attention masked per document (packing.go); 0 = one causal row
	Docs           []int64     // the packed row's documents' lengths, in order, summing to TokensPerBatch (packing.go); nil = DocTokens
	Offload        *Offload    // optimizer state, parameters, activations off the GPU
	HostMemory     int64       // host RAM per node for offload, 0 = unchecked
	Preference     *Preference // a preference objective (TRL's DPO) in place of cross-entropy (preference.go); nil = none

	// KeepGrads: gradients are zeroed in place between steps, not set to
	// None, so they stay allocated through the next forward. That was
	// torch.nn.Module.zero_grad()'s default (set_to_none=False) before
	// PyTorch 2.0, which the Hugging Face Trainer of 2022-23 called.
	KeepGrads bool

	// KeepLogits: the training loop holds the model's output, and its
	// logits, through the backward (out = model(**batch);
	// out.loss.backward(); del out: the Python variable keeps out.logits
	// alive until the backward ends), dropping it before the optimizer
	// step. The Hugging Face Trainer does not hold it: its compute_loss
	// returns the loss alone and the output is dropped before the backward.
	KeepLogits bool
	// KeepLogitsNext (with KeepLogits): the loop rebinds its output only
	// when the next micro-batch's forward returns (OpenRLHF's SFT loop:
	// per_token_log_probs, output = self.model(...)): the logits stay
	// through the optimizer step, and the micro-batch before's stay
	// through this forward (keep_logits = "next").
	KeepLogitsNext bool

	// UseCache: the model's forward builds transformers' DynamicCache
	// (use_cache=True, the config's default, which a plain training loop
	// leaves on; the Hugging Face Trainer of transformers 5 sets
	// config.use_cache from TrainingArguments.use_cache, False by default,
	// and gradient checkpointing forces it off, so it is ignored under
	// checkpointing): every attention layer copies its k and v into the
	// cache, which the output holds to the end of the forward, or through
	// the backward with KeepLogits (nn/kv_cache.go).
	UseCache bool

	// NoAttentionMask: the batch passes no attention_mask (the model is
	// called as model(input_ids, labels=...), as scripts of unpadded or
	// packed rows do); the Hugging Face Trainer's collators
	// (DataCollatorWithPadding, DataCollatorForLanguageModeling) pass one,
	// the default. Without one transformers' boolean SDPA mask of a
	// sliding-window layer is one [1, 1, seq, seq] storage expanded over
	// the batch (nn.Attention.maskExpanded).
	NoAttentionMask bool

	// DataloaderMask: whether Megatron-LM's dataloader makes each
	// sample's causal attention_mask, which get_batch loads onto the GPU
	// with every micro-batch ([batch, 1, seq, seq] bool;
	// create_attention_mask_in_dataloader, megatron_batch.go):
	// DataloaderMaskOn, DataloaderMaskOff
	// (--no-create-attention-mask-in-dataloader), "" Megatron's default,
	// on under precision "megatron" unless the rows are packed.
	DataloaderMask string

	// ExpandableSegments: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
	// the caching allocator maps pages into one growing segment per pool
	// (alloc/allocator_expandable.go).
	ExpandableSegments bool

	// Validation: a validation forward (eval mode, no gradients) runs
	// before the step through the same allocator, as Lightning's sanity
	// check does before the first step (validation.go).
	Validation bool

	// Rollout: anemoi's autoregressive steps per training step (rollout.go);
	// 0 or 1 is one step.
	Rollout int64

	// FirstStep: the first training step, before the optimizer has made
	// its state (first_step.go); false replays the steady state.
	FirstStep bool
	// EmptyCache: torch.cuda.empty_cache() (and reset_peak_memory_stats)
	// at the start of each step: the steady step starts from the
	// segments that hold the persistent tensors, not the cache of the
	// steps before it.
	EmptyCache bool

	// Overheads: how kernels are launched and the step's time outside the
	// GPU (dispatch.go); the time model's only.
	Overheads Overheads

	// Runtime memory: NCCL's and CUDA's settings that change the device
	// memory outside PyTorch's allocator (runtime_memory.go).
	RuntimeMemory RuntimeMemory

	PipeStage *StageSpec // set on the per-stage copies of a pipelined plan

	// EveryBlock lowers every repeated block rather than copying an
	// earlier one (block_clone.go): the reference the tests compare the
	// copies with; the numbers are the same.
	EveryBlock bool

	generation generation // LowerGeneration's copy: the generation phase (generation.go)
}

// gradsPersist reports whether parameter gradients exist before the
// step's backward: accumulated over micro-batches, or zeroed in place.
func (p *Plan) GradsPersist() bool { return p.GradAccum > 1 || p.KeepGrads }

// Options tune an evaluation.
type Options struct {
	Timeline bool // keep every allocation event in the report
	Trace    bool // keep the allocator's events with their addresses and the final segments (a memory snapshot)
	// Context, when set, stops an evaluation once it is done: the replay
	// looks at it every StopEvery ops (and step series between steps) and
	// the evaluation returns its error. The memsh command passes the
	// script's context, so that Ctrl-C, --timeout and --max-memory stop a
	// long simulate().
	Context context.Context
	// Names, when set, keeps copied blocks' names for every program the
	// evaluation lowers and for other evaluations sharing the table (a
	// search's replays): the same program, fewer bytes (NameTable).
	Names *NameTable
	// Buffers, when set, lends the evaluation lists that earlier ones
	// lowered their programs into, and takes them back after its
	// replays (a search's replays: BufferPool).
	Buffers *BufferPool
	// Below, when set, lowers the limit of a replay that stops at one
	// (replay.RunBelow) while it runs: the replay reads it every
	// StopEvery ops and stops once its device memory reaches the smaller
	// of the two (sim.EvaluateBelowEach: a plan's limit falls as the
	// plans before it end).
	Below *atomic.Int64
}

// StopEvery is how many ops the replay runs between looks at
// Options.Context: a look costs tens of nanoseconds, a thousand ops about
// a millisecond.
const StopEvery = 1024

// Stopped returns the error of Options.Context once it is done.
func (o Options) Stopped() error {
	if o.Context == nil {
		return nil
	}
	return o.Context.Err()
}

// Validate checks the plan before lowering.
func (p *Plan) Validate() error { return p.ValidateFor(nil) }

// ValidateFor is Validate without the model's own checks (Model.Validate)
// when p's model is checked, a model whose Validate the caller saw pass:
// those checks read the model alone, and a search checks every layout it
// enumerates of one model (231,968 for Llama 3 405B on 16,384 GPUs), each
// walk building a path for every layer.
func (p *Plan) ValidateFor(checked *Model) error { return units.Worded(p.RefusalFor(checked)) }

// RefusalFor is ValidateFor's error, or nil, not yet worded where it is
// a *units.IntError (a layout's parallelism refused by a rule whose
// message is numbers: Ulysses' heads, interleaved micro-batches): for a
// caller that counts refusals by class (search), which reads a refusal's
// message once per class, not once per layout. Its text, and what
// errors.As finds in it, are ValidateFor's.
func (p *Plan) RefusalFor(checked *Model) error {
	var memo LayoutMemo
	return p.RefusalIn(checked, &memo)
}

// RefusalIn is RefusalFor with memo's verdicts of the checks that read the
// layout and the model alone, where memo (not nil) holds this layout's
// and model's, and memo left with them (LayoutMemo): the same error, or
// nil (TestRefusalInAsRefusalFor, sim/search).
func (p *Plan) RefusalIn(checked *Model, memo *LayoutMemo) error {
	if p.Model == nil {
		return &units.Error{Msg: "plan has no model"}
	}
	if p.Model != checked {
		if err := p.Model.Validate(); err != nil {
			return err
		}
	}
	if p.Batch <= 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("batch must be positive (got %d)", p.Batch)}
	}
	if p.Seq <= 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("seq must be positive (got %d)", p.Seq), Hint: "pass seq= to train() (tokens per sequence)"}
	}
	if pts := p.Model.Points; pts > 0 && p.Seq != 1 && p.Seq != pts {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("seq must be left unset for graph model %q: its rows are the %d grid points (got seq=%d)", p.Model.Name, pts, p.Seq)}
	}
	if p.GradAccum <= 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("grad_accum must be positive (got %d)", p.GradAccum)}
	}
	if p.Members < 1 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("members must be at least 1 (got %d)", p.Members)}
	}
	if err := p.validateImages(); err != nil {
		return err
	}
	if err := p.validateVideos(); err != nil {
		return err
	}
	switch p.MembersMode {
	case "", "stacked", "sequential", "spread":
	default:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown members_mode %q (known: stacked, sequential, spread)", p.MembersMode)}
	}
	if p.Phase > Eval {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown phase %d (known: train, eval)", p.Phase)}
	}
	if err := p.RuntimeMemory.Validate(); err != nil {
		return err
	}
	if err := p.Precision.Validate(); err != nil {
		return &units.Error{Path: "train", Msg: err.Error()}
	}
	if err := p.validateZeroPrecision(); err != nil {
		return err
	}
	if err := p.Optimizer.Validate(); err != nil {
		return &units.Error{Path: "train", Msg: err.Error()}
	}
	if err := p.validateMuonLayout(); err != nil {
		return err
	}
	if p.Optimizer.InBackward && p.GradAccum > 1 {
		// torchtune 1814feb17 recipes/full_finetune_*.py raise the same
		return &units.Error{Path: "train", Msg: fmt.Sprintf("an optimizer stepped in the backward (in_backward=True) steps each parameter as soon as its gradient is complete, so gradients cannot accumulate over grad_accum=%d micro-batches", p.GradAccum),
			Hint: "grad_accum=1, or the optimizer with in_backward=False"}
	}
	if err := p.Overheads.Validate(); err != nil {
		return err
	}
	if err := p.Checkpoint.Validate(); err != nil {
		return &units.Error{Path: "train", Msg: err.Error(), Hint: "see memsh doc checkpoint"}
	}
	if err := p.checkModules(); err != nil {
		return err
	}
	if p.Checkpoint.Mode == "budget" && p.Compile.On() && p.Checkpoint.Reentrant {
		return &units.Error{Path: "train", Msg: "checkpoint(budget=..., reentrant=True) under compile: the budget is the partitioner's, no torch.utils.checkpoint runs",
			Hint: "drop reentrant=True, or compile=False for the per-block budget of eager mode"}
	}
	if err := p.validateCompileMode(); err != nil {
		return err
	}
	if p.LoRA != nil {
		if err := p.LoRA.Validate(); err != nil {
			return &units.Error{Path: "train", Msg: err.Error()}
		}
	}
	switch p.Quant {
	case "", "nf4", "nf4-dq", "int8", "torchao-nf4":
	default:
		e := &units.Error{Path: "train", Msg: fmt.Sprintf("unknown quant %q (known: nf4, nf4-dq, int8, torchao-nf4)", p.Quant)}
		switch strings.ToLower(p.Quant) {
		case "4bit", "4-bit", "bnb-4bit", "load_in_4bit":
			e.Hint = `bitsandbytes' 4-bit loading is quant="nf4" ("nf4-dq" with bnb_4bit_use_double_quant)`
		case "8bit", "8-bit", "bnb-8bit", "load_in_8bit":
			e.Hint = `bitsandbytes' 8-bit loading is quant="int8"`
		}
		return e
	}
	if err := p.validateFinetune(); err != nil {
		return err
	}
	if err := p.validateFloat8(); err != nil {
		return err
	}
	if err := p.validateQAT(); err != nil {
		return err
	}
	if p.Device.Memory <= 0 {
		return &units.Error{Path: "train", Msg: "gpu memory must be positive", Hint: `pass gpu="H100-80GB" or gpu(name=..., memory=80*GB)`}
	}
	if err := p.validateFirstStep(); err != nil {
		return err
	}
	if err := p.validateRollout(); err != nil {
		return err
	}
	if err := p.validatePreference(); err != nil {
		return err
	}
	if err := p.validateValidation(); err != nil {
		return err
	}
	if err := p.checkCounts(); err != nil { // GPU counts that products cannot overflow
		return err
	}
	return p.validateParallel(memo)
}

// LowerProgram lowers the model for one micro-batch of this plan.
func (p *Plan) LowerProgram() (*Program, error) { return p.LowerProgramSized(ProgramSize{}) }

// LowerProgramSized is LowerProgram with room made up front for as many
// ops, values and parameters as room says: the same program, without
// regrowing its lists when the caller knows about how large it will be
// (the search lowers thousands of small programs of known sizes).
func (p *Plan) LowerProgramSized(room ProgramSize) (*Program, error) {
	return p.lowerProgram(room, nil, nil)
}

// lowerProgram is LowerProgramSized, its lists started on bufs' (nil:
// none), stopped with stop's error once stop returns one (nil: never).
func (p *Plan) lowerProgram(room ProgramSize, bufs *ProgramBuffers, stop func() error) (_ *Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(lowerStopped)
			if !ok {
				panic(r)
			}
			err = s.err
		}
	}()
	prog := &Program{Loss: NoValue, Input: NoValue, Labels: NoValue}
	bufs.take(prog)
	prog.Ops = grow(prog.Ops, room.Ops) // still nil without room
	prog.Values = grow(prog.Values, room.Values)
	prog.Params = grow(prog.Params, room.Params)
	b := bufs.builder() // the last lowering's Builder, or a new one
	*b = Builder{
		names: b.names, taken: b.taken, teInput: b.teInput, headCast: b.headCast, fusedInputs: b.fusedInputs, // emptied (keepBuilder)
		scopes: b.scopes, unscope: b.unscope, // likewise, for Scope

		P:      prog,
		Batch:  p.Batch,
		Seq:    p.Seq,
		Prec:   p.Precision,
		Rt:     p.Runtime,
		Ckpt:   p.Checkpoint,
		Lora:   p.LoRA,
		Eval:   p.Phase == Eval,
		Images: p.Images,
		Videos: p.Videos,

		tiedHead:   -1,
		everyBlock: p.EveryBlock,
		stop:       stop,
		gen:        p.generation,
	}
	if bufs != nil {
		// The scratch is this lowering's alone until it hands it back,
		// for the next lowering, also after an error.
		b.clones = bufs.arena
		b.clones.shared, b.clones.scratch, b.clones.cuts = bufs.Names, bufs.scratch, bufs.cuts
		b.clones.recall.on = false
		b.clones.last = lastNames{at: b.clones.last.at[:0]} // another lowering's blocks, another scratch
		if bufs.Recall {
			b.clones.recall.start() // the last lowering's names, in call order
		}
		b.templates = bufs.Templates
		bufs.scratch, bufs.cuts, bufs.arena = nil, nil, cloneArena{}
		defer func() {
			bufs.scratch, bufs.cuts, bufs.arena = b.clones.scratch, b.clones.cuts, b.clones
			bufs.arena.shared, bufs.arena.scratch, bufs.arena.cuts = nil, nil, nil // kept in bufs' own fields
			bufs.keepBuilder(b)
		}()
	}
	b.compile = p.Compile
	b.f8 = p.Float8.forDevice(p.Device)
	b.qat = p.QAT
	// Members are folded into the batch: "stacked" runs them as one batch
	// (anemoi); "sequential" slices it back per member (members.go).
	b.members, b.sequential = max(p.Members, 1), p.MembersMode == "sequential"
	b.spread = p.MembersMode == "spread" && b.members > 1
	b.rollout = max(p.Rollout, 1)
	b.Batch *= b.foldedMembers()
	b.pref = p.Preference
	b.Batch *= p.Preference.Rows() // a pair is a chosen and a rejected row
	if p.Preference.KTO() {
		b.castCache = map[castKey]Value{} // KTO's forwards call the policy's modules twice (kto.go)
	}
	if p.Model.Points > 0 {
		b.Seq = p.Model.Points // graph models: one row per grid point
	}
	p.configureLowering(b)                  // tensor, context and expert parallelism
	p.configureFinetune(b)                  // quant, freeze, chunked loss, packing
	if err := p.lowerModel(b); err != nil { // the whole model, or one stage
		return nil, err
	}
	if err := b.checkTrainable(); err != nil { // trainable= left something to train
		return nil, err
	}
	if err := b.checkFreeze(); err != nil { // each freeze= name froze something
		return nil, err
	}
	b.partitionGraphs()                        // compiled graphs: saved sets, fused values
	b.teCublasWorkspace()                      // Transformer Engine's one cuBLAS workspace (te_fp8.go)
	if err := b.P.checkTotals(p); err != nil { // no byte sum can overflow
		return nil, err
	}
	b.P.markUnread()
	bufs.untaken(b.P, room)
	bufs.lowered(b.P)
	return b.P, nil
}
