package replay

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The step op by op: an op's forward (and its recompute inside a
// checkpointed region), its backward with the workspace and the
// gradients it makes, and the parameters' gradients and in-backward
// optimizer steps. replay.go holds the Replay's state and its allocation
// bookkeeping.

// forwardOp runs op i; in recompute, consumers are counted within the region.
func (r *Replay) forwardOp(i int, recompute bool) {
	op := &r.P.Ops[i]
	r.op = op.Name
	if r.graphs == nil && !op.SideStream && r.stream != StreamSharedExpert && r.hostHolds == nil && !r.actsOffloaded() {
		// No graph pool, side stream or host copy: the hooks below would
		// do nothing (most ops of most steps; their defers were a tenth
		// of the forward's own instructions).
		r.runForward(i, op, recompute)
		return
	}
	defer r.onGraphPool(i, false, recompute)() // CUDA graphs' private pool (cudagraphs.go)
	defer r.afterForwardOp(i)                  // saved activations to host
	thread := 0                                // the forward's thread; the backward's runs the recompute
	if recompute {
		thread = 1
	}
	defer r.onSideStream(op, thread)() // Megatron's overlapped shared expert (streams.go)
	r.runForward(i, op, recompute)
}

// runForward is forwardOp's op i (op) itself, within its hooks.
func (r *Replay) runForward(i int, op *core.OpInfo, recompute bool) {
	reuse := recompute && r.keeps(op) // the policy kept the outputs: the op does not run again
	if op.Syncs > 0 && !reuse {
		r.hostWaited() // what the NCCL stream held is free again (nccl_record.go)
	}
	for _, v := range op.Out {
		switch {
		case reuse:
			r.takeKept(v)
		case recompute && r.valT[v] != none && r.P.Regions[op.Region-1].Parent != 0:
			// A nested region's output that the enclosing recompute made
			// and an op after it still holds: PyTorch's inner recompute
			// makes a second copy, counted here as the one already live.
		default:
			r.produce(v)
		}
	}
	if op.NCCLStream && !reuse {
		for _, v := range op.In {
			r.recordOnNCCL(op, r.valT[v])
		}
		for _, v := range op.Out {
			r.recordOnNCCL(op, r.valT[v])
		}
	}
	if op.WorkF > 0 && !reuse {
		ids := r.workspace(r.workIDs[:0], op, " workspace", "forward workspace of ", op.WorkF, 1, op.Work.Forward())
		for _, id := range ids {
			r.release(id)
		}
		r.workIDs = ids[:0]
	}
	lastOf, valT := r.last, r.valT
	if recompute {
		lastOf = r.rLast
	}
	for _, v := range op.In {
		if lastOf[v] == int32(i) && valT[v] != none {
			r.finished(v)
		}
	}
	for _, v := range op.Out {
		if lastOf[v] == none {
			r.finished(v)
		}
	}
}

// recompute re-runs a checkpointed region's forward, keeping what its ops
// save: non-reentrant up to the last op that saves anything (its early
// stop); reentrant the whole region, whose outputs the backward holds
// until the region's backward ends (released in backwardOp).
func (r *Replay) recompute(id int32) {
	reg := r.P.Regions[id-1]
	values, ops, rLast, holds := r.P.Values, r.P.Ops, r.rLast, r.holds // read once (each read is checked under -race)
	stop := reg.First - 1
	for j := reg.First; j < reg.End; j++ {
		if op := &ops[j]; (op.Region == id && len(op.Saved) > 0) || reg.Reentrant {
			stop = j
		}
		if c := r.childStarting(id, j); c != 0 && len(r.regionIn[c-1]) > 0 {
			stop = j // the nested checkpoint saves its inputs (_NoopSaveInputs)
		}
	}
	inRegion := func(v core.Value) bool {
		pr := values[v].Producer
		return pr >= reg.First && pr < reg.End
	}
	if reg.Reentrant {
		for _, v := range r.regionOutputs(reg) {
			holds[v]++
		}
	}
	for j := reg.First; j <= stop; j++ {
		op := &ops[j]
		for _, v := range op.Out {
			rLast[v] = none
		}
		for _, v := range op.In {
			if inRegion(v) {
				rLast[v] = j
			}
		}
		if op.Region == id { // a nested region's ops save through its own hooks: dropped
			for _, v := range op.Saved {
				if inRegion(v) {
					holds[v]++
				}
			}
		}
		if c := r.childStarting(id, j); c != 0 {
			for _, v := range r.regionIn[c-1] {
				holds[v]++ // released when the nested region's backward ends
			}
		}
	}
	saved := r.phase
	r.phase = PhaseRecompute
	for j := reg.First; j <= stop; j++ {
		r.forwardOp(int(j), true)
	}
	r.phase = saved
	r.Redone[id-1] = true
	if reg.Reentrant {
		r.Dist.retainRecomputeInputs(r, id) // FSDP1's reshard-only hook (fsdp1_reentrant.go)
	}
}

// childStarting is the region nested directly in region id that starts
// at op j, 0 when none does.
func (r *Replay) childStarting(id int32, j int32) int32 {
	for c := r.P.Ops[j].Region; c != 0 && c != id; c = r.P.Regions[c-1].Parent {
		if r.P.Regions[c-1].Parent == id {
			if r.P.Regions[c-1].First == j {
				return c
			}
			return 0
		}
	}
	return 0
}

// regionOutputs are the values a region makes that ops after it read.
func (r *Replay) regionOutputs(reg core.Region) []core.Value {
	var out []core.Value
	for j := reg.First; j < reg.End; j++ {
		for _, v := range r.P.Ops[j].Out {
			if r.last[v] >= reg.End {
				out = append(out, v)
			}
		}
	}
	return out
}

// backwardOp runs op i's backward.
func (r *Replay) backwardOp(i int) {
	op := &r.P.Ops[i]
	r.op = op.Name
	if r.graphs == nil && !op.SideStream && r.stream != StreamSharedExpert && r.off == nil {
		// No graph pool, side stream or offload: the hooks below but
		// cuBLAS's would do nothing (forwardOp's note).
		r.backwardCublas(op)
		r.runBackward(i, op)
		return
	}
	r.beforeBackwardOp(i)                 // activations back from host
	defer r.onGraphPool(i, true, false)() // CUDA graphs' private pool (cudagraphs.go)
	defer r.afterBackwardOp(i)            // the offload timeline
	r.backwardCublas(op)                  // the first step's first backward matmul (cublas.go)
	defer r.onSideStream(op, 1)()         // Megatron's overlapped shared expert (streams.go)
	r.runBackward(i, op)
}

// runBackward is backwardOp's op i (op) itself, within its hooks.
func (r *Replay) runBackward(i int, op *core.OpInfo) {
	if op.Region != 0 {
		var room [8]int32
		chain := r.P.AppendAncestors(room[:0], op.Region)
		for k := len(chain) - 1; k >= 0; k-- { // an enclosing region's recompute first
			if reg := r.P.Regions[chain[k]-1]; !r.Redone[chain[k]-1] && !reg.NoGrad && !reg.Offload {
				r.recompute(chain[k])
			}
		}
		r.op = op.Name
	}
	values, gradT := r.P.Values, r.gradT
	recorded := false
	for _, v := range op.Out {
		if values[v].Grad {
			recorded = true
			break
		}
	}
	saved := op.Saved
	if recorded && op.GradsInForward { // the saved gradients become the gradients
		for _, v := range saved {
			r.unhold(v)
		}
		saved = nil
	}
	if recorded {
		work := r.backwardWorkspace(op)
		if op.WeightGradFirst { // a compiled linear: the weight's gradient, then its saved input goes
			r.paramGradients(op)
			saved = r.unholdActivations(saved)
		}
		if !op.NoGradB {
			inPlace := op.GradInPlace && len(op.Out) > 0
			for _, v := range op.In {
				vi := &values[v]
				if !vi.Grad || vi.Fused || gradT[v] != none {
					continue
				}
				if inPlace {
					if g := gradT[op.Out[0]]; g != none { // written into the output's gradient
						gradT[v], gradT[op.Out[0]] = g, none
						if gradT[v] != none {
							continue
						}
					}
				}
				gdt, gb := vi.GradBytes() // torchao's gathered fp8 input has a bf16 gradient (core/float8_tp.go)
				gb = max(gb, 1)           // as allocateParts asks
				if vi.Routed != 0 {
					gb = r.routedBytes(v, gb) // routing.go
				}
				if blk, ok := r.allocBlock(gb); r.plain(gb, ok) {
					gradT[v] = r.keepPlain(blk, core.CatTemporaries)
				} else {
					gradT[v] = r.allocated(Alloc{Tensor: vi.Name, Shape: vi.Shape, DType: gdt, Bytes: gb, Why: vi.Name, Cat: core.CatTemporaries},
						allocParts{tensor: "grad of ", why: "gradient of "}, blk, ok)
				}
			}
		}
		if !op.WeightGradFirst {
			r.paramGradients(op)
		}
		if op.NCCLStream { // the backward's collective: the output's gradient in, the input's out
			for _, v := range op.Out {
				r.recordOnNCCL(op, gradT[v])
			}
			for _, v := range op.In {
				r.recordOnNCCL(op, gradT[v])
			}
		}
		for _, id := range work {
			r.release(id)
		}
		r.workIDs = work[:0]
	}
	for _, v := range op.Out {
		if g := gradT[v]; g != none {
			if !r.Dist.keepsGrad(v, g) {
				r.release(g)
			}
			gradT[v] = none
		}
	}
	for _, v := range saved {
		r.unhold(v)
	}
	for id := op.Region; id != 0; id = r.P.Regions[id-1].Parent { // the regions op i begins, innermost first
		reg := r.P.Regions[id-1]
		if reg.First != int32(i) {
			break
		}
		for _, v := range r.regionIn[id-1] {
			r.unhold(v)
		}
		r.releaseKept(reg) // kept past the recompute's early stop
		if reg.Reentrant && r.Redone[id-1] {
			for _, v := range r.regionOutputs(reg) {
				r.unhold(v)
			}
		}
	}
	if r.Plan.Optimizer.InBackward {
		for _, pi := range op.Params {
			pi = r.resolve(pi)
			if r.paramLast[pi] == int32(i) && r.paramGrad[pi] != none {
				r.stepInBackward(pi)
			}
		}
	}
}

// paramGradients makes or accumulates the gradients of op's parameters.
func (r *Replay) paramGradients(op *core.OpInfo) {
	leaf := !r.readsWeightCopy(op)
	for _, pi := range op.Params {
		r.paramGradient(r.resolve(pi), leaf)
	}
}

// unholdActivations releases the saved activations of a linear whose
// weight gradient is made (WeightGradFirst) and returns the rest (weight
// copies, which its input's gradient reads), in a list of its own.
func (r *Replay) unholdActivations(saved []core.Value) []core.Value {
	var rest []core.Value
	values := r.P.Values
	for _, v := range saved {
		if values[v].Cat == core.CatParams {
			rest = append(rest, v)
			continue
		}
		r.unhold(v)
	}
	return rest
}

// backwardWorkspace allocates op's backward workspace: the tensors of
// op.Work, or WorkB bytes in WorkBParts tensors of equal size (one when
// unset). Its ids are in r.workIDs' room (the caller hands it back).
func (r *Replay) backwardWorkspace(op *core.OpInfo) []int32 {
	if op.WorkB <= 0 {
		return r.workIDs[:0]
	}
	return r.workspace(r.workIDs[:0], op, " backward workspace", "backward workspace of ", op.WorkB, max(int64(op.WorkBParts), 1), op.Work.Backward())
}

// workspace allocates total bytes as the tensors sizes lists or, with
// none, as n tensors of equal size (the last takes the remainder), named
// op.Name+name, why+op.Kind, and appends their ids to ids. A workspace
// lives within one op's forward or backward and no other is made before
// it is released: ops.go lends every call the one room, r.workIDs.
func (r *Replay) workspace(ids []int32, op *core.OpInfo, name, why string, total, n int64, sizes []int64) []int32 {
	add := func(b int64) {
		n := max(b, 1) // as allocateParts asks; the shape is [b] (allocParts.dim)
		if blk, ok := r.allocBlock(n); r.plain(n, ok) {
			ids = append(ids, r.keepPlain(blk, core.CatTemporaries))
		} else {
			ids = append(ids, r.allocated(Alloc{Tensor: name, DType: units.INT8, Bytes: n, Why: op.Kind, Cat: core.CatTemporaries},
				allocParts{tensor: op.Name, why: why, dim: b}, blk, ok))
		}
	}
	if len(sizes) == 0 {
		for k := range n {
			b := total / n
			if k == n-1 {
				b = total - (n-1)*(total/n)
			}
			add(b)
		}
		return ids
	}
	for _, b := range sizes {
		add(b)
	}
	return ids
}

// releaseKept drops the policy's hold on the kept outputs of a region that
// its recomputation never reached (it stops after the last op that saves
// a tensor): the selective-checkpoint cache lives until the region's
// backward is over.
func (r *Replay) releaseKept(reg core.Region) {
	for j := reg.First; j < reg.End; j++ {
		for _, v := range r.P.Ops[j].Out {
			if r.kept[v] {
				r.kept[v] = false
				r.unhold(v)
			}
		}
	}
}

// paramGradient makes parameter pi's gradient for one op that reads it
// (leaf: the op reads the parameter itself, not a low-precision copy whose
// gradient flows to it through the copy's op).
//
// A parameter read by several ops in one step (a tied embedding and its
// output head, a head run in chunks) gets one gradient from each use. The
// autograd engine sums them in the InputBuffer of the parameter's
// AccumulateGrad node, out of place for dense gradients
// (torch/csrc/autograd/input_buffer.cpp: buffer[pos] = old_var + var;
// measured on the CPU with torch 2.15: aten.add, not add_, at every use
// after the first): while one is added, the running sum, the use's
// gradient and the new sum live at once.
func (r *Replay) paramGradient(pi int32, leaf bool) {
	p := &r.P.Params[pi]
	// A tied parameter (another micro-batch's copy on a pipeline stage, a
	// tied embedding) has its gradient on the parameter it is tied to.
	if !p.Trainable || p.TiedTo >= 0 {
		return
	}
	if r.paramGrad[pi] != none {
		if leaf && r.gradFresh[pi] {
			r.sumGradient(pi)
		}
		return
	}
	if r.Dist.gradient(r, pi) {
		return
	}
	dt := r.gradDType(p)
	r.paramGrad[pi] = r.allocateParts(Alloc{Tensor: ".grad", Shape: p.Shape, DType: dt, Bytes: dt.Bytes(p.Numel), Why: p.Name, Cat: core.CatGrads},
		allocParts{tensor: p.Name, why: "gradient of parameter "})
	r.gradFresh[pi] = leaf
}

// gradDType is the dtype autograd makes parameter p's gradient in: the
// plan's gradients', but under DeepSpeed's ZeRO the parameter's own,
// whatever dtype its optimizer accumulates them in (grad_accum_dtype:
// core.Precision.ZeroGradAccum).
func (r *Replay) gradDType(p *core.ParamInfo) units.DType {
	if r.Dist != nil && r.Dist.Mode == DistZeRO {
		return p.Stored(r.Plan.Precision)
	}
	return p.GradDType(r.Plan.Precision)
}

// sumGradient adds one more use's gradient to parameter pi's running sum,
// out of place (paramGradient).
func (r *Replay) sumGradient(pi int32) {
	p := &r.P.Params[pi]
	dt := r.gradDType(p)
	b := dt.Bytes(p.Numel)
	use := r.allocate(Alloc{Tensor: p.Name + " gradient of one use", Shape: p.Shape, DType: dt, Bytes: b, Why: "gradient of one use of " + p.Name + ", added to the others' sum out of place", Cat: core.CatTemporaries})
	sum := r.allocate(Alloc{Tensor: p.Name + ".grad", Shape: p.Shape, DType: dt, Bytes: b, Why: "gradient of parameter " + p.Name + " (the sum over its uses)", Cat: core.CatGrads})
	r.release(r.paramGrad[pi])
	r.release(use)
	r.paramGrad[pi] = sum
}

// readsWeightCopy reports whether op reads a parameter through a
// low-precision copy (autocast's weight cast): its gradient goes to the
// copy, and the copy's op hands it to the parameter.
func (r *Replay) readsWeightCopy(op *core.OpInfo) bool {
	for _, v := range op.In {
		if r.P.Values[v].Cat == core.CatParams {
			return true
		}
	}
	return false
}

// stepInBackward steps one parameter as soon as its gradient is complete
// and frees the gradient (optimizer_in_backward / fused backward step).
func (r *Replay) stepInBackward(pi int32) {
	p := &r.P.Params[pi]
	st := p.StateDType(r.Plan.Precision)
	if tmp, _ := r.Plan.Optimizer.StepTemporary(st.Bytes(p.Numel), st.Bytes(p.Numel)); tmp > 0 { // one tensor
		r.release(r.allocate(Alloc{Tensor: p.Name + " step temporaries", Shape: []int64{tmp}, DType: units.INT8, Bytes: tmp, Why: "optimizer step temporaries", Cat: core.CatTemporaries}))
	}
	r.release(r.paramGrad[pi])
	r.paramGrad[pi] = none
}
