package core

// Megatron-Core's fused layer kernels. Precision "megatron" stands for
// Megatron-LM's recipe as it runs today, Megatron-Core with Transformer
// Engine (--transformer-impl transformer_engine, the default), whose
// layers save less than transformers' eager ones:
//
//   - RMSNorm is TE's fused kernel (TENorm, and the norm fused into
//     TELayerNormColumnParallelLinear before the qkv and fc1 GEMMs): one
//     kernel computes the output in the input's dtype and rsigma, one
//     fp32 per row, and saves the input and rsigma
//     (transformer_engine/pytorch/ops/basic/rmsnorm.py at v2.3:
//     save_for_backward(x, rstdevs); module/layernorm_linear.py: the
//     input, ln_out for the GEMM and rsigma). Eager keeps an fp32 copy
//     of the input, its rsqrt and the normalized input (ops.go,
//     rmsNorm). The backward allocates the input's gradient (no in-place
//     write, unlike Liger's).
//   - SwiGLU and GeGLU are Megatron's fused activations
//     (megatron/core/fusions/fused_bias_swiglu.py and fused_bias_geglu.py
//     at core_v0.13.0, used when bias_activation_fusion is set:
//     Megatron's --bias-swiglu-fusion default, and ms-swift's):
//     SwiGLUFunction saves its input, the fc1 output holding gate and up,
//     and makes the product in one kernel; eager also keeps act(gate).
//     Megatron-Core 0.13's grouped experts also weight the product by
//     the routing probabilities in that kernel (WeightedSwiGLUFunction,
//     saving the probabilities as well: nn's moe_megatron.go).

// MegatronKernels reports whether the plan runs Megatron-Core's fused
// norms and gated activations.
func (b *Builder) MegatronKernels() bool { return b.Prec.Megatron }

// FusedGLU lowers Megatron's fused SwiGLU (act "silu") or GeGLU (act
// "gelu"): act(gate) * up in one kernel that saves gate and up, the
// halves of the fc1 output. With probs (one weight per row, the routed
// experts of Megatron-Core 0.13: WeightedSwiGLUFunction) the product is
// weighted by them in the same kernel, which saves them too.
func (b *Builder) FusedGLU(act string, gate, up, probs Value) Value {
	ins := []Value{gate, up}
	if probs != NoValue {
		ins = append(ins, probs)
	}
	i := b.AddOp("swiglu", "fused_"+act+"_glu", ins)
	y := b.Out(i, "act_mul", b.Shape(gate), b.Dtype(gate), "fused "+act+"(gate) * up")
	b.Save(i, ins...)
	op := b.Op(i)
	op.Flops = 5 * float64(Numel(b.Shape(gate)))
	for _, v := range ins {
		op.Bytes += float64(b.Val(v).Bytes)
	}
	return y
}

// teRMSNorm lowers Transformer Engine's fused RMSNorm on x with weight w.
func (b *Builder) teRMSNorm(x Value, w int32) Value {
	return b.fusedRMSNorm(x, w, "te_rms_norm", "TE RMSNorm", "rsigma", false)
}
