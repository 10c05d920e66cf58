package core

// Model FLOPs of a training step, the numerator of MFU: the forward, and
// the backward the step needs. A matmul with a weight (a linear, an
// expert's grouped GEMM, a quantized base) runs one GEMM of its forward's
// FLOPs for the input gradient, when an input needs one, and one for the
// weight gradient, when the weight is trainable; a product of two
// activations one GEMM for each operand that needs a gradient (Gemma 4's
// pooler averages the patches by a one-hot matrix that needs none); any
// other op with FLOPs counts twice its forward for its backward when it
// has one. With every
// weight trainable that is the usual 3 x forward: PaLM's model FLOPs
// (Chowdhery et al. 2022, "PaLM", Appendix B: 6N per token, 2N forward and
// 4N backward, plus attention) and Megatron-LM's. A frozen weight's
// gradient is not computed (Hu et al. 2021, "LoRA", section 4.2: no
// gradients for most parameters, hence its faster training), so it is
// not counted either: a LoRA base linear inside the model counts 2 x its
// forward, and one whose input needs no gradient (the first frozen layer)
// its forward only.

// OpNeedsGrad reports what op's backward computes: input gradients (an
// input needs a gradient and the op produces input gradients) and weight
// gradients (one of its parameters, through its tie, is trainable). An op
// whose backward does not run (HasBackward) computes neither, whatever
// its inputs and parameters require.
func (p *Program) OpNeedsGrad(op *OpInfo) (input, weight bool) {
	if !p.HasBackward(op) {
		return false, false
	}
	if p.GradsInputs(op) {
		for _, v := range op.In {
			if p.Values[v].Grad {
				input = true
				break
			}
		}
	}
	for _, pi := range op.Params {
		q := &p.Params[pi]
		if q.TiedTo >= 0 {
			q = &p.Params[q.TiedTo]
		}
		if q.Trainable {
			weight = true
			break
		}
	}
	return input, weight
}

// HasBackward reports whether op's backward runs: one of its outputs
// gets a gradient (ValueInfo.Grad). None does for an op run under
// torch.no_grad() or inference mode (built under Builder.NoGrad: a frozen
// tower's unread layers, a no_grad indexer, a teacher's or a validation
// forward), whatever its inputs and parameters require: the generated
// VariableType kernels give an output a grad_fn only when
// compute_requires_grad holds, false outright when GradMode is off
// (torch/csrc/autograd/functions/utils.h in the torch 2.15.0 wheel, lines
// 60-65); nor for an op no loss depends on (the rollout loop's last
// advance_input, rollout.go), whose backward the engine never reaches. An
// op with no outputs (an in-place accumulation into its input) runs its
// backward with the input it writes: it counts as having one.
func (p *Program) HasBackward(op *OpInfo) bool {
	if len(op.Out) == 0 {
		return true
	}
	for _, v := range op.Out {
		if p.Values[v].Grad {
			return true
		}
	}
	return false
}

// GradsInputs reports whether op's backward hands its inputs gradients
// (those that require one): it runs (HasBackward) and makes input
// gradients (not NoGradB).
func (p *Program) GradsInputs(op *OpInfo) bool { return !op.NoGradB && p.HasBackward(op) }

// weightGEMM says whether op is a matmul against its own weight, whose
// backward splits into an input-gradient and a weight-gradient GEMM.
func weightGEMM(op *OpInfo) bool {
	switch op.Kind {
	case "matmul", "int8_matmul", "grouped_matmul":
		return len(op.Params) > 0
	}
	return false
}

// OpModelFlops is op i's model FLOPs in a training step: its forward and
// the backward the step needs (the comment above).
func (p *Program) OpModelFlops(i int) float64 {
	op := &p.Ops[i]
	if op.Flops == 0 {
		return 0
	}
	input, weight := p.OpNeedsGrad(op)
	if weightGEMM(op) {
		f := op.Flops
		if input {
			f += op.Flops
		}
		if weight {
			f += op.Flops
		}
		return f
	}
	if op.Kind == "matmul" && len(op.Params) == 0 && len(op.In) == 2 && p.GradsInputs(op) {
		// a product of two activations computes the gradient of each
		// operand that needs one (derivatives.yaml: bmm's self and mat2
		// gradients are each computed only when required), a matmul each
		f := op.Flops
		for _, v := range op.In {
			if p.Values[v].Grad {
				f += op.Flops
			}
		}
		return f
	}
	if input || weight {
		return 3 * op.Flops
	}
	return op.Flops
}

// ModelFlops is the model FLOPs of one training pass of p (every op's
// OpModelFlops).
func (p *Program) ModelFlops() float64 {
	var f float64
	for i := range p.Ops {
		f += p.OpModelFlops(i)
	}
	return f
}

// RecomputeEnd is the end (exclusive) of the ops whose kernels region
// id's (1-based) recomputation runs. A reentrant region re-runs its whole
// forward, and so does Megatron's recompute (WholeRecompute: its
// CheckpointFunction calls the layer's forward again, whole). A non-reentrant one stops early (torch.utils.checkpoint's
// early_stop, its default: _StopRecomputationError from the pack hook of
// the last tensor the forward saved), so nothing after the last op that
// saves anything runs, and that op's kernel runs only if it saves one of
// its own outputs: autograd packs an op's saved inputs before its kernel
// and its saved outputs after. A Llama layer stops at down_proj, whose
// GEMM is not run again (tools/oracle/flops.py: FlopCounterMode counts no
// recompute for it; sim/flops_torch_test.go). A nested checkpoint saves
// its inputs before its first op runs (_NoopSaveInputs); the replay stops
// its memory at the same op (replay/ops.go recompute).
func (p *Program) RecomputeEnd(id int32) int32 {
	reg := &p.Regions[id-1]
	if reg.Reentrant || reg.WholeRecompute {
		return reg.End
	}
	end := reg.First
	for j := reg.First; j < reg.End; j++ {
		op := &p.Ops[j]
		switch {
		case op.Region == id && len(op.Saved) > 0:
			end = j
			if savesOwnOutput(op) {
				end = j + 1
			}
		case p.childStarts(id, j):
			end = j
		}
	}
	return end
}

// RecomputeEnds is RecomputeEnd of every region, by region id - 1, in
// dst's room.
func (p *Program) RecomputeEnds(dst []int32) []int32 {
	dst = dst[:0]
	for k := range p.Regions {
		dst = append(dst, p.RecomputeEnd(int32(k+1)))
	}
	return dst
}

func savesOwnOutput(op *OpInfo) bool {
	for _, s := range op.Saved {
		for _, o := range op.Out {
			if s == o {
				return true
			}
		}
	}
	return false
}

// childStarts reports whether a region nested directly in region id
// starts at op j.
func (p *Program) childStarts(id, j int32) bool {
	for c := p.Ops[j].Region; c != 0 && c != id; c = p.Regions[c-1].Parent {
		if r := &p.Regions[c-1]; r.Parent == id && r.First == j {
			return true
		}
	}
	return false
}

// RecomputeKernel reports whether region id's recomputation runs op j's
// kernel: j is before RecomputeEnd (end, computed once per region) and a
// checkpoint policy does not keep its outputs where the region records a
// graph.
func (p *Program) RecomputeKernel(id, j, end int32) bool {
	if j >= end {
		return false
	}
	op := &p.Ops[j]
	return !(op.Keep && op.Region != 0 && !p.Regions[op.Region-1].NoGrad)
}

// OpRecomputeFlops is op i's forward FLOPs run again in a training step by
// the recomputation of the checkpoint regions around it (each that is not
// offloaded, once per level of nesting) that reach its kernel
// (RecomputeEnd, RecomputeKernel). It walks the regions' ops: for a whole
// program, loop over the regions as ProgramFLOPs does.
func (p *Program) OpRecomputeFlops(i int) float64 {
	op := &p.Ops[i]
	var n float64
	for id := op.Region; id != 0; id = p.Regions[id-1].Parent {
		if !p.Regions[id-1].Offload && p.RecomputeKernel(id, int32(i), p.RecomputeEnd(id)) {
			n++
		}
	}
	return n * op.Flops
}
