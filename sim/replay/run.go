package replay

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Run replays one steady-state step of a lowered program on one GPU: the
// memory figures of the report, before the time model (Settle completes
// the report afterwards).
func Run(prog *core.Program, plan *core.Plan, opts core.Options) (*Replay, error) {
	return RunBelow(prog, plan, opts, math.MaxInt64)
}

// RunBelow is Run for a caller that wants no report of a step whose
// device memory (Report.DeviceUsed) reaches limit bytes: it returns a nil
// Replay as soon as that is certain, for a plan that replays a first
// step (training on one GPU, a Megatron layout, FSDP2): DeviceUsed is the step's most reserved memory or more
// (steadyReserved) plus the memory outside the allocator, the steady
// step starts with the first step's most reserved as its own
// (warmFirstStep), and that peak only grows. So the steady step is not
// replayed when the first step alone reached the limit, and stops at the
// op where it reaches it. Such a step has no paged optimizer state,
// offload or host tables (warmFirstStep's conditions), so Settle would
// find no host memory to refuse either.
func RunBelow(prog *core.Program, plan *core.Plan, opts core.Options, limit int64) (*Replay, error) {
	return RunBelowIn(prog, plan, opts, limit, nil)
}

// RunBelowIn is RunBelow with the replays' step state made in lists s
// keeps (nil: lists of their own): a first step's go back to s when it
// ends, the steady step's when RunBelowIn returns no replay, or when its
// caller is done with the one it returns (Replay.Recycle).
func RunBelowIn(prog *core.Program, plan *core.Plan, opts core.Options, limit int64, s *Scratch) (*Replay, error) {
	dev := plan.Device
	overheads := Overheads(plan) // the CUDA context, NCCL's buffers (device.go)
	overheads = append(overheads, SymmMemOverheads(prog)...)
	overheads = append(overheads, VLLMOverheads(plan)...)
	var nonTorch int64
	for _, o := range overheads {
		nonTorch += o.Bytes
	}
	r := newReplayIn(prog, plan, opts, dev.Memory-nonTorch, s)
	returned := false
	defer func() {
		if !returned { // stopped, or failed: nothing reads r
			r.Recycle()
		}
	}()
	r.nonTorch = nonTorch
	var err error
	if r.Dist, err = NewDist(plan, prog); err != nil { // nil on one GPU
		return nil, err
	}
	if plan.Validation {
		if r.valProg, r.valPlan, err = plan.LowerValidation(); err != nil {
			return nil, err
		}
	}
	if plan.GenerationReplayed() {
		if r.genProg, r.genPlan, err = plan.LowerGeneration(); err != nil {
			return nil, err
		}
	}
	warm, err := warmFirstStep(r, func() (*Replay, error) {
		first := r.sibling(dev.Memory-nonTorch, s)
		first.nonTorch = nonTorch
		var err error
		first.Dist, err = NewDist(plan, prog)
		return first, err
	})
	if err != nil {
		return nil, err
	}
	if b := opts.Below; b != nil {
		limit = min(limit, b.Load())
	}
	if warm && r.off == nil && r.hostHolds == nil && limit < math.MaxInt64 {
		if r.Rep.PeakReserved+nonTorch >= limit {
			return nil, nil
		}
		r.stopAt = max(limit-nonTorch, 1) // forward and backward stop there
	}
	if !warm {
		r.setup()
	}
	r.forward()
	if err := opts.Stopped(); err != nil { // the caller's context
		return nil, err
	}
	if r.stopped {
		return nil, nil
	}
	if plan.Phase != core.Eval {
		r.backward()
		if err := opts.Stopped(); err != nil {
			return nil, err
		}
		if r.stopped {
			return nil, nil
		}
		r.dropHeldBackward()
		r.optimizerStep()
	}
	r.finish()
	if r.traced != nil {
		r.traceEnd()
	}
	rep := r.Rep
	rep.Capacity = dev.Memory
	rep.Overheads = overheads
	rep.PeakReserved = r.steadyReserved()
	rep.AllocRetries = r.alloc.Retries
	rep.Streams = r.streamPeaks()
	rep.DeviceUsed = rep.PeakReserved + nonTorch + rep.States.pagedBytes(plan)
	rep.Headroom = dev.Memory - rep.DeviceUsed
	rep.Fits = rep.OOM == nil && rep.Headroom >= 0
	rep.Params = plan.Model.Params()
	for _, p := range prog.Params {
		if p.Trainable && p.TiedTo < 0 && !p.StageCopy {
			rep.TrainableParams += p.FullNumel
		}
	}
	rep.Breakdown = r.deviceBreakdown()
	returned = true
	return r, nil
}

// Report is the step's report as the replay has filled it so far.
func (r *Replay) Report() *Report { return r.Rep }

// Settle completes the report after the time model: the collectives' bytes
// and network traffic, paged optimizer state and offload's host memory.
func (r *Replay) Settle() error {
	r.Dist.finishComm(r.Rep)                   // r.comm_bytes, network traffic
	return r.finishFinetune(r.Rep, r.nonTorch) // paged state, offload host memory
}

// pagedBytes is optimizer state in CUDA unified memory (paged optimizers):
// on the device, but not in PyTorch's allocator.
func (s States) pagedBytes(plan *core.Plan) int64 {
	if plan.Optimizer.Paged() {
		return s.Optimizer
	}
	return 0
}

// setup allocates what exists before the step: parameters, master weights,
// optimizer state (steady state), accumulated gradients, the cuBLAS
// workspace and the input batch.
func (r *Replay) setup() {
	r.phase, r.op = PhaseSetup, "model"
	plan := r.Plan
	prec := plan.Precision
	st := &r.Rep.States
	train := plan.Phase != core.Eval
	r.setupBuffers()           // moved to the device with the parameters, never sharded
	if r.Dist.setupStates(r) { // sharded parameters, gradients and state
		goto workspace
	}
	for pi := range r.P.Params {
		p := &r.P.Params[pi]
		if p.TiedTo >= 0 || r.quantParam(p) {
			continue
		}
		b := r.paramBytes(p)
		r.allocate(Alloc{Tensor: p.Name, Shape: p.Shape, DType: p.Stored(prec), Bytes: b, Why: "parameter", Cat: core.CatParams})
		st.Params += b
	}
	if train {
		r.op = "optimizer state"
		for pi := range r.P.Params {
			p := &r.P.Params[pi]
			if !r.stepped(pi) {
				continue
			}
			if m := p.MasterDType(prec); m != units.InvalidDType {
				b := m.Bytes(p.Numel)
				r.allocate(Alloc{Tensor: p.Name + " master", Shape: p.Shape, DType: m, Bytes: b, Why: "fp32 master weight", Cat: core.CatOptimizer})
				st.Master += b
			}
			states := plan.Muon().ParamStates(p, p.StateDType(prec))
			for _, s := range states.List() {
				st.Optimizer += s.Bytes
				if plan.Optimizer.Paged() || plan.FirstStep {
					continue // unified memory, outside the caching allocator; or made by the first step()
				}
				r.allocState(p, s, "")
			}
			t := r.optimizerTraffic(p, states.Bytes())
			r.Rep.Traffic.HBM += t
			r.Rep.Traffic.Optimizer += t
		}
		r.setupTableStates()
		r.generationPass() // with the gradients None (generation.go)
		r.accumulatedGradients()
	}
workspace:
	r.cublasWorkspaces() // cublas.go
	if r.valProg != nil {
		r.validationPass(r.valProg, r.valPlan) // before the step's batch
		r.phase = PhaseSetup
	}
	r.generationPass() // a sharded layout's: after its states (Dist.setupStates)
	r.batchAt, r.setupPoints, r.setupLargest = r.live.len(), len(r.Rep.Timeline), r.Rep.Largest
	for _, v := range r.P.BatchValues() {
		r.op = "batch"
		r.produce(v)
	}
	r.setupTableRows()
}

// accumulatedGradients allocates the gradients kept from the micro-batches
// before the replayed one (grad_accum) or from the last step
// (zero_grad(set_to_none=False)): those of the parameters the step gives
// one; the others' .grad stays None (gradlessParams).
func (r *Replay) accumulatedGradients() {
	if !r.Plan.GradsPersist() {
		return
	}
	r.op = "accumulated gradients"
	for pi := range r.P.Params {
		if !r.gradless[pi] {
			r.paramGradient(int32(pi), false)
		}
	}
}

// allocState allocates one optimizer state tensor of parameter p,
// explained as "optimizer state NAME" and whyTail (names joined only when
// the report keeps the allocation: allocParts).
func (r *Replay) allocState(p *core.ParamInfo, s core.StateTensor, whyTail string) int32 {
	return r.allocateParts(Alloc{Tensor: s.Name, Shape: p.Shape, DType: p.StateDType(r.Plan.Precision), Bytes: s.Bytes, Why: s.Name, Cat: core.CatOptimizer},
		allocParts{tensor: p.Name, sep: " ", why: "optimizer state ", whyTail: whyTail})
}

// paramBytes is a parameter's storage on this GPU.
func (r *Replay) paramBytes(p *core.ParamInfo) int64 {
	return p.Stored(r.Plan.Precision).Bytes(p.Numel)
}

// optimizerTraffic is the HBM traffic of one parameter's update: AdamW
// reads the weight, its gradient and both moments and writes the weight
// and both moments.
func (r *Replay) OptimizerTraffic(p *core.ParamInfo) int64 {
	states := r.Plan.Muon().ParamStates(p, p.StateDType(r.Plan.Precision))
	return r.optimizerTraffic(p, states.Bytes())
}

// optimizerTraffic is OptimizerTraffic with the bytes s of p's optimizer
// states given (setup has them already).
func (r *Replay) optimizerTraffic(p *core.ParamInfo, s int64) int64 {
	if o := r.Plan.Muon(); o.MuonMatrix(p) {
		if o.NS == core.MuonEmerging { // Megatron's, one expert's matrix at a time (muon_megatron.go)
			s := o.MuonMatrixShape(p)
			return p.Numel / core.Numel(s) * r.MuonEmergingTraffic(p, s)
		}
		return r.MuonTraffic(p)
	}
	prec := r.Plan.Precision
	w := p.Stored(prec).Bytes(p.Numel)
	g := p.GradDType(prec).Bytes(p.Numel)
	m := int64(0)
	if prec.Master != units.InvalidDType && p.DType == units.InvalidDType {
		m = prec.Master.Bytes(p.Numel)
	}
	return 2*w + g + 2*s + 2*m
}

// stopLook is the look every StopEvery ops: whether the caller's
// context is done; and a limit lowered since (Options.Below) lowers
// stopAt.
func (r *Replay) stopLook() bool {
	if r.opts.Stopped() != nil {
		return true
	}
	if b := r.opts.Below; b != nil && r.stopAt > 0 {
		r.stopAt = min(r.stopAt, max(b.Load()-r.nonTorch, 1))
	}
	return false
}

func (r *Replay) forward() {
	r.phase = r.fwdPhase
	for i := range r.P.Ops {
		if i%core.StopEvery == 0 && r.stopLook() { // Run returns the error
			return
		}
		op := &r.P.Ops[i]
		r.Rep.FLOPs.Model += op.Flops
		r.Dist.beforeForward(r, i) // gather sharded parameters
		r.forwardOp(i, false)
		r.Dist.afterForward(r, i)
		if r.stopAt > 0 && r.Rep.PeakReserved >= r.stopAt { // RunBelow's limit
			r.stopped = true
			return
		}
	}
	// Leaving autocast clears its weight cache.
	r.op = "end of forward"
	r.freeKeptAllGather() // FSDP2's root post-forward (streams.go)
	values := r.P.Values  // read once (each read is checked under -race)
	for v := range values {
		if values[v].Cached {
			r.unhold(core.Value(v))
		}
	}
	r.dropCopiedAfterForward()
	if r.quiet { // a first step's saved bytes go unread (lazy_states.go)
		return
	}
	saved := r.Saved
	for v, t := range r.valT {
		if t == none || !saved[v] {
			continue
		}
		switch vi := &values[v]; vi.Cat {
		case core.CatActivations:
			r.Rep.SavedActivations += vi.Bytes
		case core.CatParams:
			r.Rep.SavedWeightCopies += vi.Bytes
		}
	}
}

func (r *Replay) backward() {
	r.dropHeldForward()
	r.phase = PhaseBackward
	clear(r.gradFresh) // gradients alive now were kept from before this backward
	if r.P.Loss != core.NoValue {
		r.op = "loss.backward"
		r.gradT[r.P.Loss] = r.allocate(Alloc{Tensor: "grad of loss", DType: units.FP32, Bytes: 4, Why: "seed gradient", Cat: core.CatTemporaries})
	}
	for i := len(r.P.Ops) - 1; i >= 0; i-- {
		if i%core.StopEvery == 0 && r.stopLook() { // Run returns the error
			return
		}
		r.Dist.beforeBackward(r, i) // pipeline seeds, gathers
		r.backwardOp(i)
		r.Dist.afterBackward(r, i)                          // reduce-scatter, reshard
		if r.stopAt > 0 && r.Rep.PeakReserved >= r.stopAt { // RunBelow's limit
			r.stopped = true
			return
		}
	}
	r.Dist.mergeOutputs(r) // a torch pipeline's last stage
	if !r.quiet {          // a first step's FLOPs go unread (lazy_states.go)
		r.countFLOPs()
	}
	if r.P.Loss != core.NoValue {
		r.unhold(r.P.Loss)
	}
}

// countFLOPs sets the step's FLOPs once its backward has run: the model's
// forward and backward, and the forwards of the checkpointed regions it
// recomputed.
func (r *Replay) countFLOPs() {
	for id, done := range r.Redone {
		if done {
			reg := r.P.Regions[id]
			for j, end := reg.First, r.P.RecomputeEnd(int32(id+1)); j < end; j++ { // its early stop (core/model_flops.go)
				if !r.keeps(&r.P.Ops[j]) { // kept outputs are not computed again
					r.Rep.FLOPs.Recompute += r.P.Ops[j].Flops
				}
			}
		}
	}
	r.Rep.FLOPs.Model = r.P.ModelFlops() // the forward and the backward the step needs (core/model_flops.go)
	r.Rep.FLOPs.Hardware = r.Rep.FLOPs.Model + r.Rep.FLOPs.Recompute
}

// optimizerStep runs the step's temporaries (gradients stay until the next
// zero_grad(set_to_none=True)).
func (r *Replay) optimizerStep() {
	r.phase, r.op = PhaseOptimizer, "optimizer.step"
	r.hostWaited() // the gradient norm and found_inf read on the host (nccl_record.go)
	r.stepTables() // sparse tables step row-wise, whatever the optimizer
	r.op = "optimizer.step"
	r.makePending()              // a Megatron first step's moments (lazy_states.go)
	if r.Dist.optimizerStep(r) { // the sharded step
		return
	}
	if r.Plan.Optimizer.InBackward || r.offloadStep() { // the step runs on the host
		return
	}
	r.firstStepStates() // Adam's moments appear in the first step()
	prec := r.Plan.Precision
	for pi := range r.P.Params {
		p := &r.P.Params[pi]
		if p.Trainable && p.TiedTo < 0 && r.paramGrad[pi] != none {
			r.Rep.States.Grads += p.GradDType(prec).Bytes(p.Numel)
		}
	}
	r.stepTemporaries(func(pi int) int64 {
		p := &r.P.Params[pi]
		return p.StateDType(prec).Bytes(p.Numel)
	},
		"temporaries of the "+r.Plan.Optimizer.Kind.String()+" step ("+r.Plan.StepImpl()+")")
}

// stepTemporaries allocates the optimizer step's transient memory over the
// parameters it steps (stepped), size(pi) bytes of states each, and frees it when
// the step ends: one block of what Optimizer.StepTemporary says, or, where
// it says one tensor per parameter (foreach), a block per parameter, all
// alive at once and freed in order.
func (r *Replay) stepTemporaries(size func(pi int) int64, why string) {
	opt, stepped := r.Plan.Optimizer, r.stepped
	opt.Impl = r.Plan.StepImpl()
	if opt.Kind == core.Muon { // its matrices one at a time, then its AdamW on the rest
		r.muonStepTemporaries()
		opt.Kind, why = core.AdamW, "temporaries of muon()'s adamw step ("+opt.ImplName()+") of the parameters that are not its matrices"
		stepped = func(pi int) bool { return r.stepped(pi) && !r.Plan.Muon().MuonMatrix(&r.P.Params[pi]) }
	}
	var largest, total int64
	for pi := range r.P.Params {
		if stepped(pi) {
			b := size(pi)
			total += b
			largest = max(largest, b)
		}
	}
	tmp, perTensor := opt.StepTemporary(largest, total)
	if tmp <= 0 {
		return
	}
	st := r.Plan.Precision.States
	if !perTensor {
		r.release(r.allocate(Alloc{Tensor: "optimizer step temporaries", Shape: []int64{tmp * 8 / int64(st.Bits())}, DType: st, Bytes: tmp, Why: why, Cat: core.CatTemporaries}))
		return
	}
	ids := make([]int32, 0, len(r.P.Params))
	for pi := range r.P.Params {
		if !stepped(pi) {
			continue
		}
		p := &r.P.Params[pi]
		if b := size(pi); b > 0 {
			dt := p.StateDType(r.Plan.Precision)
			ids = append(ids, r.allocateParts(Alloc{Tensor: "step temporary", DType: dt, Bytes: b, Why: why, Cat: core.CatTemporaries},
				allocParts{tensor: p.Name, sep: " ", whyTail: ", one tensor per parameter", dim: b * 8 / int64(dt.Bits())}))
		}
	}
	for _, id := range ids {
		r.release(id)
	}
}

// finish frees what the step leaves (gradients are set to None before the
// next step; the batch is dropped).
func (r *Replay) finish() {
	defer r.recordPeakCache() // a step that ends at its peak
	r.Rep.Frag.PeakGrowth.settle()
	r.Dist.releaseKeptGrads(r)
	for _, v := range r.P.Held { // the loop's logits list
		r.unhold(v)
	}
	r.dropHeldForward()
	r.dropHeldBackward() // an evaluation: no backward dropped them
	if r.Plan.Optimizer.InBackward {
		for pi := range r.P.Params {
			p := &r.P.Params[pi]
			if p.Trainable && p.TiedTo < 0 {
				r.Rep.States.Grads = max(r.Rep.States.Grads, p.GradDType(r.Plan.Precision).Bytes(p.Numel))
			}
		}
	}
}
