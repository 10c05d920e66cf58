package core

import "github.com/memsh/memsh/sim/units"

// What a softmax saves besides its output under torch <= 1.10
// (Runtime.SoftmaxSavesInput): its input, as the op sees it. Under CUDA
// autocast softmax is on the fp32 list, so the op reads (and keeps) an
// fp32 copy of a half input; softmax(x, dtype=torch.float32) on a half
// input runs half_to_float and keeps the half input itself.

// SoftmaxInput is the tensor a softmax over x reads: x, or, when the
// runtime keeps it and autocast casts it (autocastFP32), the fp32 copy.
func (b *Builder) SoftmaxInput(x Value, autocastFP32 bool) Value {
	if b.Rt.SoftmaxSavesInput && autocastFP32 && b.Dtype(x) != units.FP32 {
		return b.Cast(x, units.FP32, "autocast fp32 copy of the softmax input (kept for the backward by torch <= 1.10)")
	}
	return x
}

// SaveSoftmaxInput saves softmax op i's input x where the runtime keeps it.
func (b *Builder) SaveSoftmaxInput(i int32, x Value) {
	if b.Rt.SoftmaxSavesInput {
		b.Save(i, x)
	}
}
