package core

import "github.com/memsh/memsh/sim/units"

// Liger-Kernel's layer kernels as apply_liger_kernel_to_llama (and the
// Hugging Face Trainer's use_liger_kernel=True) patch them in
// (train(liger_kernels=True); src/liger_kernel/ops/rms_norm.py and
// swiglu.py at v0.8.2, 000be60):
//
//   - LigerRMSNormFunction: one kernel computes Y (a new tensor in X's
//     dtype) and RSTD (one fp32 per row); it saves X, the weight and RSTD.
//     Its backward writes dX into dY in place (in_place=True, the
//     default; Gemma 2's patch passes False) and sums the weight's
//     gradient through an (SMs x H) fp32 buffer (not counted: a few MB).
//     Eager PyTorch instead keeps the input's fp32 copy, the row's rsqrt
//     and the normalized input (ops.go, rmsNorm).
//   - LigerSiLUMulFunction: c = silu(a) * b in one kernel (c a new tensor
//     like a); it saves a and b, and its backward writes their gradients
//     into them in place (swiglu_backward). Eager keeps a, silu(a) and b
//     and allocates both gradients.
//
// Liger's RoPE (in place on contiguous copies of q and k, saving cos and
// sin) changes transients only and is not modelled.

// ligerKernels reports whether the plan runs Liger's layer kernels.
func (b *Builder) ligerKernels() bool { return b.Ft != nil && b.Ft.ligerLayers }

// RMSNormFused reports whether RMSNorms run as one kernel (Liger's, or
// Transformer Engine's under Megatron): RmsNorm then lowers a model's own
// RMSNorm too (Liger patches Gemma's with LigerRMSNormForGemma, the same
// kernel with offset 1.0).
func (b *Builder) RMSNormFused() bool { return b.ligerKernels() || b.MegatronKernels() }

// LigerSwiGLU reports whether a SwiGLU MLP runs Liger's SiLU-and-multiply
// kernel.
func (b *Builder) LigerSwiGLU() bool { return b.ligerKernels() }

// ligerRMSNorm lowers LigerRMSNorm on x with weight w.
func (b *Builder) ligerRMSNorm(x Value, w int32) Value {
	b.P.LigerKernels = true
	return b.fusedRMSNorm(x, w, "liger_rms_norm", "Liger RMSNorm", "rstd", true) // dX written into dY
}

// fusedRMSNorm lowers a one-kernel RMSNorm (Liger's, Transformer
// Engine's) named name: the output a new tensor in x's dtype and one fp32
// 1/rms per row (stat), saving x and stat; gradInPlace when its backward
// writes dX into dY.
func (b *Builder) fusedRMSNorm(x Value, w int32, name, label, stat string, gradInPlace bool) Value {
	i := b.AddOp("rms_norm", name, []Value{x}, w)
	y := b.Out(i, "out", b.Shape(x), b.Dtype(x), b.Concat(label, " output"))
	rs := b.Out(i, stat, []int64{Rows(b.Shape(x))}, units.FP32, b.Concat(label, " 1/rms per row (saved)"))
	b.Val(rs).Grad = false
	b.Save(i, x, rs)
	op := b.Op(i)
	op.GradInPlace = gradInPlace
	op.Flops = 4 * float64(Numel(b.Shape(x)))
	op.Bytes += float64(b.Val(x).Bytes)
	return y
}

// LigerSiLUMul lowers LigerSiLUMulFunction: silu(a) * b.
func (b *Builder) LigerSiLUMul(a, c Value) Value {
	i := b.AddOp("swiglu", "liger_swiglu", []Value{a, c})
	b.P.LigerKernels = true
	y := b.Out(i, "act_mul", b.Shape(a), b.Dtype(a), "Liger SwiGLU output silu(gate) * up")
	b.Save(i, a, c)
	op := b.Op(i)
	op.GradsInForward = true // the gradients are written into the saved a and b
	op.Flops = 5 * float64(Numel(b.Shape(a)))
	op.Bytes += float64(b.Val(a).Bytes + b.Val(c).Bytes)
	return y
}
