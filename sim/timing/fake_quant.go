package timing

import "github.com/memsh/memsh/sim/core"

// The backward of torchao's fake quantizers (core/qat.go; torchao 0.18.0,
// quant_primitives.py), op by op, where autograd's rule is not the
// general one (twice the forward's bytes), for a tensor of n elements:
//
//   - _Round.apply (the straight-through estimator) returns the output's
//     gradient itself: no kernel. So do the add of the zero point and the
//     sub of it (AddBackward0, SubBackward0: the zero point needs no
//     gradient), addBackward's rule.
//   - clamp (derivatives.yaml, clamp: clamp_backward(grad, self, min,
//     max)): where((self >= min).logical_and_(self <= max), grad, 0),
//     four kernels: the two comparisons read self (e bytes an element)
//     and write a bool mask each, logical_and_ reads both and writes one,
//     where reads the mask and the gradient (g bytes) and writes the
//     result: (2e + 2g + 6) n bytes.
//   - The products by 1/scale and by the scale promote to fp32 (d * fp32
//     tensor): MulBackward0 writes grad * other in fp32 (4n in, 4n out),
//     and the engine casts it to the input's dtype d when that is not
//     fp32 (validate_outputs: 4n in, d n out), a second kernel.

// fakeQuantBackward is the backward of a fake quantizer's op: its HBM
// bytes and kernels; ok is false for an op the general rules price.
func (pr *pricer) fakeQuantBackward(op *core.OpInfo) (bytes, kernels float64, ok bool) {
	if !op.FakeQuant || len(op.Out) == 0 || len(op.In) == 0 {
		return 0, 0, false
	}
	p := pr.prog
	out := &p.Values[op.Out[0]]
	in := &p.Values[op.In[0]]
	n := float64(core.Numel(out.Shape))
	switch op.Kind {
	case "round":
		return 0, 0, true
	case "sub":
		bytes, kernels = pr.addBackward(op)
		return bytes, kernels, true
	case "clamp":
		e, g := elemBytes(in.Dtype), elemBytes(out.Dtype)
		return (2*e + 2*g + 6) * n, 4, true
	case "mul":
		o := elemBytes(out.Dtype)
		bytes, kernels = 2*o*n, 1
		if in.Dtype != out.Dtype {
			bytes, kernels = bytes+(o+elemBytes(in.Dtype))*n, 2
		}
		return bytes, kernels, true
	}
	return 0, 0, false
}
