package core

// Megatron-Core's fused gated activation. Precision "megatron" stands for
// Megatron-LM's recipe as it runs today, Megatron-Core with Transformer
// Engine, whose grouped experts (TEGroupedMLP) run SwiGLU as one fused
// kernel: megatron/core/fusions/fused_bias_swiglu.py at core_v0.13.0,
// used when bias_activation_fusion is set (Megatron's
// --bias-swiglu-fusion default, and ms-swift's). SwiGLUFunction saves its
// input, the fc1 output holding gate and up, and makes the product in
// one kernel; eager keeps silu(gate) too. Megatron-Core 0.13's grouped
// experts also weight the product by the routing probabilities in that
// kernel (WeightedSwiGLUFunction, saving the probabilities as well:
// nn's moe_megatron.go).
//
// Only the routed experts use it so far. Megatron's dense MLPs and shared
// experts run the same fused SwiGLU, and Transformer Engine's RMSNorm
// keeps the bf16 input and rsigma where transformers' eager one keeps an
// fp32 copy of the input and the normalized input; those layers are still
// lowered eagerly for every precision (issue 19: moving them changes
// every Megatron calibration at once).

// MegatronKernels reports whether the plan runs Megatron-Core's fused
// kernels.
func (b *Builder) MegatronKernels() bool { return b.Prec.Name == "megatron" }

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
