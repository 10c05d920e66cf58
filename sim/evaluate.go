package sim

import "strings"

// Evaluate replays one steady-state step of the plan on one GPU.
func Evaluate(plan *Plan, opts Options) (*Report, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if rep, ok, err := evaluatePipeline(plan, opts); ok { // pipeline.go: one replay per stage
		return rep, err
	}
	prog, err := plan.lowerProgram()
	if err != nil {
		return nil, err
	}
	if err := plan.checkFirstStep(prog); err != nil { // first_step.go
		return nil, err
	}
	dev := plan.Device
	overheads := []Overhead{{
		Name: "cuda_context", Bytes: dev.Context,
		Source: "CUDA context and loaded kernels for " + dev.Name + " (" + dev.Source + ")",
	}}
	overheads = append(overheads, plan.commOverheads()...) // comm.go: NCCL buffers
	var nonTorch int64
	for _, o := range overheads {
		nonTorch += o.Bytes
	}
	r := newReplay(prog, plan, opts, dev.Memory-nonTorch)
	r.dist = newDist(plan, prog) // sharding.go: nil on one GPU
	if plan.Validation {
		if r.valProg, r.valPlan, err = plan.lowerValidation(); err != nil { // validation.go
			return nil, err
		}
	}
	r.setup()
	r.forward()
	if err := opts.stopped(); err != nil { // plan.go: the caller's context
		return nil, err
	}
	if plan.Phase != "eval" {
		r.backward()
		if err := opts.stopped(); err != nil {
			return nil, err
		}
		r.optimizerStep()
	}
	r.finish()
	rep := r.rep
	rep.Capacity = dev.Memory
	rep.Overheads = overheads
	rep.DeviceUsed = rep.PeakReserved + nonTorch + rep.States.pagedBytes(plan)
	rep.Headroom = dev.Memory - rep.DeviceUsed
	rep.Fits = rep.OOM == nil && rep.Headroom >= 0
	rep.Params = plan.Model.Params()
	for _, p := range prog.params {
		if p.trainable && p.tiedTo < 0 {
			rep.TrainableParams += p.fullNumel
		}
	}
	rep.Time = stepTime(prog, plan, r)
	rep.Breakdown = make([]Share, 0, numCategories+2)
	for c := Category(0); c < numCategories; c++ {
		rep.Breakdown = append(rep.Breakdown, Share{Name: c.String(), Bytes: rep.peakCat[c]})
	}
	rep.Breakdown = append(rep.Breakdown,
		Share{Name: "fragmentation", Bytes: rep.peakReservedThen - rep.PeakAllocated},
		Share{Name: "context", Bytes: nonTorch})
	graphAdvice(plan, rep)                                  // graph_advice.go: notes on a graph model's failure
	r.dist.finishComm(rep)                                  // comm.go: r.comm_bytes, network traffic
	if err := r.finishFinetune(rep, nonTorch); err != nil { // paging.go: paged state, offload host memory
		return nil, err
	}
	return rep, nil
}

// pagedBytes is optimizer state in CUDA unified memory (paged optimizers):
// on the device, but not in PyTorch's allocator.
func (s States) pagedBytes(plan *Plan) int64 {
	if plan.Optimizer.Paged() {
		return s.Optimizer
	}
	return 0
}

// cublasWorkspace is the cuBLAS workspace PyTorch allocates through its
// caching allocator per handle and stream (aten/src/ATen/cuda/
// CublasHandlePool.cpp, getChosenWorkspaceSize): 4096 KiB * 8 on Hopper and
// newer, 4096 KiB * 2 + 16 KiB * 8 before.
func cublasWorkspace(d Device) int64 {
	n := strings.ToUpper(d.Name)
	if strings.HasPrefix(n, "H1") || strings.HasPrefix(n, "H2") || strings.HasPrefix(n, "B") || strings.HasPrefix(n, "GB") {
		return 4096 * 1024 * 8
	}
	return 4096*1024*2 + 16*1024*8
}

// setup allocates what exists before the step: parameters, master weights,
// optimizer state (steady state), accumulated gradients, the cuBLAS
// workspace and the input batch.
func (r *replay) setup() {
	r.phase, r.op = PhaseSetup, "model"
	plan := r.plan
	prec := plan.Precision
	st := &r.rep.States
	train := plan.Phase != "eval"
	r.setupBuffers()           // buffers.go: moved to the device with the parameters, never sharded
	if r.dist.setupStates(r) { // sharding.go: sharded parameters, gradients and state
		goto workspace
	}
	for pi := range r.p.params {
		p := &r.p.params[pi]
		if p.tiedTo >= 0 || r.offloadParam(p) || r.quantParam(p) { // offload.go, quant.go
			continue
		}
		b := r.paramBytes(p)
		r.allocate(Alloc{Tensor: p.name, Shape: p.shape, DType: prec.Params, Bytes: b, Why: "parameter", Cat: CatParams})
		st.Params += b
	}
	if train {
		r.op = "optimizer state"
		for pi := range r.p.params {
			p := &r.p.params[pi]
			if p.tiedTo >= 0 || !p.trainable || r.offloadState(p) { // offload.go: state on the host
				continue
			}
			if prec.Master != InvalidDType && prec.Master != prec.Params {
				b := prec.Master.Bytes(p.numel)
				r.allocate(Alloc{Tensor: p.name + " master", Shape: p.shape, DType: prec.Master, Bytes: b, Why: "fp32 master weight", Cat: CatOptimizer})
				st.Master += b
			}
			for _, s := range plan.Optimizer.states(p.shape, p.numel, prec.States) {
				st.Optimizer += s.bytes
				if plan.Optimizer.Paged() || plan.FirstStep {
					continue // unified memory, outside the caching allocator; or made by the first step() (first_step.go)
				}
				r.allocState(p, s, "optimizer state "+s.name)
			}
			t := r.optimizerTraffic(p)
			r.rep.Traffic.HBM += t
			r.rep.Traffic.Optimizer += t
		}
		r.setupTableStates() // table_replay.go
		if plan.gradsPersist() {
			r.op = "accumulated gradients"
			for pi := range r.p.params {
				r.paramGradient(int32(pi))
			}
		}
	}
workspace:
	r.op = "cublas"
	r.allocate(Alloc{Tensor: "cuBLAS workspace", Bytes: cublasWorkspace(plan.Device), DType: INT8, Why: "cuBLAS workspace (allocated through the caching allocator)", Cat: CatTemporaries})
	if r.valProg != nil {
		r.validationPass(r.valProg, r.valPlan) // validation.go: before the step's batch
		r.phase = PhaseSetup
	}
	if r.p.input != noValue {
		r.op = "batch"
		r.produce(r.p.input)
	}
	r.setupTableRows() // table_replay.go
	r.setupOffload()   // offload.go
}

// allocState allocates one optimizer state tensor of parameter p.
func (r *replay) allocState(p *paramInfo, s stateTensor, why string) {
	r.allocate(Alloc{Tensor: p.name + " " + s.name, Shape: p.shape, DType: r.plan.Precision.States, Bytes: s.bytes, Why: why, Cat: CatOptimizer})
}

// paramBytes is a parameter's storage on this GPU.
func (r *replay) paramBytes(p *paramInfo) int64 {
	return r.plan.Precision.Params.Bytes(p.numel)
}

// optimizerTraffic is the HBM traffic of one parameter's update: AdamW
// reads the weight, its gradient and both moments and writes the weight
// and both moments.
func (r *replay) optimizerTraffic(p *paramInfo) int64 {
	prec := r.plan.Precision
	w := prec.Params.Bytes(p.numel)
	g := prec.Grads.Bytes(p.numel)
	var s int64
	for _, x := range r.plan.Optimizer.states(p.shape, p.numel, prec.States) {
		s += x.bytes
	}
	m := int64(0)
	if prec.Master != InvalidDType {
		m = prec.Master.Bytes(p.numel)
	}
	return 2*w + g + 2*s + 2*m
}

func (r *replay) forward() {
	r.phase = r.fwdPhase
	for i := range r.p.ops {
		if i%stopEvery == 0 && r.opts.stopped() != nil { // Evaluate returns the error
			return
		}
		op := &r.p.ops[i]
		r.rep.FLOPs.Model += op.flops
		r.dist.beforeForward(r, i) // gather.go: gather sharded parameters
		r.forwardOp(i, false)
		r.dist.afterForward(r, i)
	}
	// Leaving autocast clears its weight cache.
	r.op = "end of forward"
	for v := range r.p.values {
		if r.p.values[v].cached {
			r.unhold(Value(v))
		}
	}
	for v, t := range r.valT {
		if t == none || !r.saved[v] {
			continue
		}
		switch r.p.values[v].cat {
		case CatActivations:
			r.rep.SavedActivations += r.p.values[v].bytes
		case CatParams:
			r.rep.SavedWeightCopies += r.p.values[v].bytes
		}
	}
}

func (r *replay) backward() {
	r.phase = PhaseBackward
	if r.p.loss != noValue {
		r.op = "loss.backward"
		r.gradT[r.p.loss] = r.allocate(Alloc{Tensor: "grad of loss", DType: FP32, Bytes: 4, Why: "seed gradient", Cat: CatTemporaries})
	}
	fwd := r.rep.FLOPs.Model
	for i := len(r.p.ops) - 1; i >= 0; i-- {
		if i%stopEvery == 0 && r.opts.stopped() != nil { // Evaluate returns the error
			return
		}
		r.dist.beforeBackward(r, i) // gather.go: pipeline seeds, gathers
		r.backwardOp(i)
		r.dist.afterBackward(r, i) // gather.go: reduce-scatter, reshard
	}
	for id, done := range r.redone {
		if done {
			reg := r.p.regions[id]
			for j := reg.first; j < reg.end; j++ {
				r.rep.FLOPs.Recompute += r.p.ops[j].flops
			}
		}
	}
	r.rep.FLOPs.Model = 3 * fwd
	r.rep.FLOPs.Hardware = r.rep.FLOPs.Model + r.rep.FLOPs.Recompute
	if r.p.loss != noValue {
		r.unhold(r.p.loss)
	}
}

// optimizerStep runs the step's temporaries (gradients stay until the next
// zero_grad(set_to_none=True)).
func (r *replay) optimizerStep() {
	r.phase, r.op = PhaseOptimizer, "optimizer.step"
	r.stepTables() // table_replay.go: sparse tables step row-wise, whatever the optimizer
	r.op = "optimizer.step"
	if r.dist.optimizerStep(r) { // gather.go: the sharded step
		return
	}
	if r.plan.Optimizer.InBackward || r.offloadStep() { // offload.go: the step runs on the host
		return
	}
	r.firstStepStates() // first_step.go: Adam's moments appear in the first step()
	st := r.plan.Precision.States
	var largest, total int64
	for pi := range r.p.params {
		p := &r.p.params[pi]
		if !p.trainable || p.tiedTo >= 0 {
			continue
		}
		b := st.Bytes(p.numel)
		total += b
		if b > largest {
			largest = b
		}
		if r.paramGrad[pi] != none {
			r.rep.States.Grads += r.plan.Precision.Grads.Bytes(p.numel)
		}
	}
	if tmp := r.plan.Optimizer.stepTemporary(largest, total); tmp > 0 {
		r.release(r.allocate(Alloc{Tensor: "optimizer step temporaries", Shape: []int64{tmp * 8 / int64(st.Bits())}, DType: st, Bytes: tmp, Why: "temporaries of the " + r.plan.Optimizer.Kind + " step (" + r.plan.Optimizer.impl() + ")", Cat: CatTemporaries}))
	}
}

// finish frees what the step leaves (gradients are set to None before the
// next step; the batch is dropped).
func (r *replay) finish() {
	for _, v := range r.p.held { // chunked_loss.go: the loop's logits list
		r.unhold(v)
	}
	if r.plan.Optimizer.InBackward {
		for pi := range r.p.params {
			p := &r.p.params[pi]
			if p.trainable && p.tiedTo < 0 {
				r.rep.States.Grads = max(r.rep.States.Grads, r.plan.Precision.Grads.Bytes(p.numel))
			}
		}
	}
}
