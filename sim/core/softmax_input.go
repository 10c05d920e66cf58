package core

import "github.com/memsh/memsh/sim/units"

// What a softmax reads, and saves besides its output under torch <= 1.10
// (Runtime.SoftmaxSavesInput). A softmax computed in fp32 on a bf16 input
// reads an fp32 copy of it: softmax(x, dtype=torch.float32) runs the fused
// half_to_float kernel only for an fp16 input on CUDA, and otherwise
// converts first (aten/src/ATen/native/SoftMax.cpp, softmax: "Tensor
// converted = dtype.has_value() ? input_.toType(dtype.value()) : input_;
// return at::_softmax(converted, dim_, false)"), and CUDA autocast casts
// softmax's input to fp32 (softmax is on its fp32 list). The copy is a
// transient of the forward (_softmax saves its result); in the backward
// the gradient of the input is fp32 too, then cast to the input's dtype
// (ToCopyBackward0). Measured on one H200 (sim/testdata/cuda_h200,
// tools/oracle/cuda_run.sh): Llama blocks with bf16 eager attention peak
// 2 GiB (the fp32 copy and gradient of one layer's [1, 32, 4096, 4096]
// scores) above a replay without the copy. Torch <= 1.10 kept the copy
// for the backward (the op's input).

// SoftmaxInput is the tensor a softmax computing in dt reads from x: x,
// or an fp32 copy of x when dt is fp32 and x is not, except for an fp16 x
// given dtype=torch.float32 on CUDA outside autocast (half_to_float).
func (b *Builder) SoftmaxInput(x Value, dt units.DType, autocast bool) Value {
	xt := b.Dtype(x)
	if dt != units.FP32 || xt == units.FP32 {
		return x
	}
	if xt == units.FP16 && !autocast && !b.Rt.CPU {
		return x // the fused half_to_float kernel reads the half input
	}
	why := "fp32 copy of the softmax input (softmax(x, dtype=torch.float32) converts a bf16 input first)"
	if autocast {
		why = "autocast fp32 copy of the softmax input"
	}
	if b.Rt.SoftmaxSavesInput {
		why += ", kept for the backward by torch <= 1.10"
	}
	return b.Cast(x, units.FP32, why)
}

// SaveSoftmaxInput saves softmax op i's input x where the runtime keeps it.
func (b *Builder) SaveSoftmaxInput(i int32, x Value) {
	if b.Rt.SoftmaxSavesInput {
		b.Save(i, x)
	}
}
