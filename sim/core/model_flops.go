package core

// Model FLOPs of a training step, the numerator of MFU: the forward, and
// the backward the step needs. A matmul with a weight (a linear, an
// expert's grouped GEMM, a quantized base) runs one GEMM of its forward's
// FLOPs for the input gradient, when an input needs one, and one for the
// weight gradient, when the weight is trainable; any other op with FLOPs
// counts twice its forward for its backward when it has one. With every
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
// gradients (one of its parameters, through its tie, is trainable).
func (p *Program) OpNeedsGrad(op *OpInfo) (input, weight bool) {
	if !op.NoGradB {
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

// OpRecomputeFlops is op i's forward FLOPs run again in a training step by
// the recompute of the checkpoint regions around it: once per level of
// nesting (Depth), none for an op whose outputs a checkpoint policy keeps
// where its region records a graph.
func (p *Program) OpRecomputeFlops(i int) float64 {
	op := &p.Ops[i]
	if op.Flops == 0 || (op.Region != 0 && op.Keep && !p.Regions[op.Region-1].NoGrad) {
		return 0
	}
	return float64(p.Depth(i)) * op.Flops
}
