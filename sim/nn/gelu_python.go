package nn

import "github.com/memsh/memsh/sim/core"

// pythonGELU lowers the GELU variants transformers writes as Python
// arithmetic (transformers/activations.py: NewGELUActivation, also
// AccurateGELUActivation's formula; FastGELUActivation; GELUActivation
// with use_gelu_python; QuickGELUActivation) as the eager ops they run,
// each saving what its autograd node saves: scalar products and sums save
// nothing, a product of two tensors saves both, tanh and sigmoid their
// result, pow and erf their input. Measured on the CPU (torch 2.15,
// transformers 5.24, TestPythonGELUSaves): gelu_new 8 kernels and 4
// tensors of the input's size saved (the input, tanh's output, 0.5 x and
// 1 + tanh), gelu_fast 9 and 7, gelu_python 5 and 3 (not the input),
// quick_gelu 3 and 2; gelu and gelu_pytorch_tanh are one aten::gelu
// saving its input.
func pythonGELU(b *core.Builder, fn string, x core.Value) core.Value {
	scalar := func(v core.Value) core.Value { return b.Unary("mul", v, false, false) } // v * c, v / c
	plus := func(v core.Value) core.Value { return b.Unary("add", v, false, false) }   // 1 + v
	switch fn {
	case "gelu_new": // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
		half := scalar(x)
		cube := b.Unary("pow", x, true, false)
		inner := b.Add("add", x, scalar(cube))
		t := b.Unary("tanh", scalar(inner), false, true)
		return b.Mul("mul", half, plus(t))
	case "gelu_fast": // 0.5 * x * (1 + tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)))
		half, scaled := scalar(x), scalar(x)
		sq := b.Mul("mul", scalar(x), x)
		t := b.Unary("tanh", b.Mul("mul", scaled, plus(sq)), false, true)
		return b.Mul("mul", half, plus(t))
	case "gelu_python": // x * 0.5 * (1 + erf(x / sqrt(2)))
		half := scalar(x)
		e := b.Unary("erf", scalar(x), true, false)
		return b.Mul("mul", half, plus(e))
	}
	// quick_gelu: x * sigmoid(1.702 * x)
	s := b.Unary("sigmoid", scalar(x), false, true)
	return b.Mul("mul", x, s)
}
