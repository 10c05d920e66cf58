package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Backward rules that differ from the general one (twice the forward's
// bytes), each autograd's own for the op (PyTorch's
// tools/autograd/derivatives.yaml and torch/csrc/autograd), for ops
// priced one by one (eager dispatch; fused groups keep bwdFactor):
//
//   - An add (derivatives.yaml, add.Tensor and add.Scalar: "self:
//     handle_r_to_c(self.scalar_type(), grad)", "other:
//     handle_r_to_c(other.scalar_type(), maybe_multiply(grad,
//     alpha.conj()))"; AddBackward0 and AddBackward1) hands the output's
//     gradient to its inputs as it is: no kernel. The engine then fits
//     each input's gradient to its metadata (validate_outputs in
//     torch/csrc/autograd/engine.cpp): a broadcast operand gets
//     at::sum_to (a reduction reading the whole gradient and writing the
//     operand's), an operand of another dtype (type promotion) a cast
//     (grad.to(dtype): the gradient read, the operand's bytes written).
//     A bias added as a parameter is such a broadcast operand.
//   - A dtype cast (derivatives.yaml, _to_copy: "self:
//     _to_copy_backward(grad, self.options())", ToCopyBackward0) casts the
//     gradient back: it reads the gradient in the output's dtype and
//     writes it in the input's, the forward's bytes. Casts to fp8 are not
//     _to_copy (torchao's and Transformer Engine's own functions) and keep
//     the general rule.
//   - Two uses of one tensor get their gradients summed (InputBuffer::
//     accumulate, torch/csrc/autograd/input_buffer.cpp: old_var.add_(var)
//     or old_var + var): one add of the tensor's gradient, reading two and
//     writing one, per use beyond the first. Its gradient arrives first
//     from the last use in the forward, so every earlier use's backward
//     runs the add (gradAccumulation). Row slices of one tensor (views,
//     or casts of tensor_split chunks) are one use: split's backward
//     gathers the chunks' gradients into one (SplitBackward), it does not
//     sum full-size ones.
//   - x.pow(2) (derivatives.yaml, pow.Tensor_Scalar: "self:
//     pow_backward(grad, self, exponent)"; FunctionsManual.cpp,
//     pow_backward: grad * (exp * self.pow(exp - 1))) runs three
//     kernels over the input's size: self.pow(1), a copy (Pow.cpp,
//     pow_Tensor_Scalar_out: an exponent of 1 is out.copy_(base)), its
//     product with the exponent, and the product with the gradient:
//     seven passes over the input, where the general rule took two over
//     the output. Hugging Face's RMSNorm squares its fp32 input so.

// addBackward is the backward of an add op: its kernels and the HBM
// bytes they move.
func (pr *pricer) addBackward(op *core.OpInfo) (bytes, kernels float64) {
	if len(op.Out) == 0 {
		return 0, 0
	}
	p := pr.prog
	out := &p.Values[op.Out[0]]
	ob := elemBytes(out.Dtype)
	on := float64(core.Numel(out.Shape))
	if p.GradsInputs(op) {
		for _, v := range op.In {
			in := &p.Values[v]
			if !in.Grad {
				continue
			}
			n := float64(core.Numel(in.Shape))
			if n < on { // sum_to: the gradient reduced to the operand's shape
				bytes += on*ob + n*ob
				kernels++
			}
			if in.Dtype != out.Dtype { // grad.to(dtype)
				bytes += n * (ob + elemBytes(in.Dtype))
				kernels++
			}
		}
	}
	for _, pi := range op.Params {
		q := &p.Params[pi]
		if q.TiedTo >= 0 {
			q = &p.Params[q.TiedTo]
		}
		if q.Trainable && float64(q.Numel) < on { // a bias: sum_to over the rows
			bytes += on*ob + float64(q.Numel)*ob
			kernels++
		}
	}
	return bytes, kernels
}

// powBackward is the backward of x.pow(2) (core's RMSNorm): the bytes
// of pow_backward's copy (two passes), scalar product (two) and product
// with the gradient (three reads and writes of the input's size), and
// its three kernels.
func (pr *pricer) powBackward(op *core.OpInfo) (bytes, kernels float64) {
	if len(op.In) == 0 {
		return 0, 0
	}
	return 7 * float64(pr.prog.Values[op.In[0]].Bytes), 3
}

// castBackward reports whether op is a dtype cast whose backward is one
// cast of the gradient back (ToCopyBackward0): not a cast to or from fp8.
func castBackward(p *core.Program, op *core.OpInfo) bool {
	if op.Kind != "cast" || len(op.Out) == 0 || p.Values[op.Out[0]].Dtype == units.FP8 {
		return false
	}
	return len(op.In) == 0 || p.Values[op.In[0]].Dtype != units.FP8
}

// gradUses counts, for eager dispatch, the uses of each value that
// receive a gradient (accumulations in pr.accum: the bytes of the adds
// each op's backward runs into gradients already there).
func (pr *pricer) gradUses(s *Prices) {
	p := pr.prog
	s.accum = resize(s.accum, len(p.Ops))
	s.last = resize(s.last, len(p.Values))
	s.sliced = resize(s.sliced, len(p.Values))
	clear(s.accum)
	clear(s.sliced)
	s.accumK = resize(s.accumK, len(p.Ops))
	clear(s.accumK)
	pr.accumK = s.accumK
	for v := range s.last {
		s.last[v] = -1
	}
	pr.accum = s.accum
	// Backward order: last use first. A use before the last one (in the
	// forward) finds the gradient of a later one already in the buffer.
	for i := len(p.Ops) - 1; i >= 0; i-- {
		op := &p.Ops[i]
		if !gradEdge(p, op) {
			continue
		}
		for _, v := range op.In {
			val := &p.Values[v]
			if !val.Grad {
				continue
			}
			if slice(p, op, v) {
				if s.sliced[v] { // another chunk of the same split: one use
					continue
				}
				s.sliced[v] = true
			}
			if s.last[v] >= 0 { // the gradient's bytes: a view's too
				gdt, _ := val.GradBytes() // torchao's gathered fp8 input has a bf16 gradient (core/float8_tp.go)
				pr.accum[i] += 3 * float64(core.Numel(val.Shape)) * elemBytes(gdt)
				pr.accumK[i]++
			}
			s.last[v] = int32(i)
		}
	}
}

// gradEdge reports whether op's backward hands its inputs gradients: it
// is recorded (an output needs a gradient), not bookkeeping, and makes
// input gradients.
func gradEdge(p *core.Program, op *core.OpInfo) bool {
	if op.NoGradB || op.Kind == "keep_alive" || op.Kind == "release" {
		return false
	}
	for _, o := range op.Out {
		if p.Values[o].Grad {
			return true
		}
	}
	return false
}

// slice reports whether op reads a row slice of v: a view of it, or a
// cast of fewer elements than v holds (autocast's copy of a
// tensor_split chunk).
func slice(p *core.Program, op *core.OpInfo, v core.Value) bool {
	switch op.Kind {
	case "view":
		return true
	case "cast":
		return len(op.Out) > 0 && core.Numel(p.Values[op.Out[0]].Shape) < core.Numel(p.Values[v].Shape)
	}
	return false
}

// gradAccumulation adds to c the adds op i's backward runs into
// gradients already there.
func (pr *pricer) gradAccumulation(i int, c *OpCost) {
	if pr.accumK == nil || pr.accumK[i] <= 0 {
		return
	}
	t, _ := streamTime(&pr.d, pr.accum[i])
	c.Bwd += max(t, pr.accumK[i]*kernelFloor)
	c.BwdK += pr.accumK[i]
}
