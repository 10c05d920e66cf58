package core

// Soft-capping (Gemma 2, transformers models/gemma2/modeling_gemma2.py):
// x -> cap * tanh(x / cap), over the final logits (final_logit_softcapping,
// Gemma2ForCausalLM.forward) and over the eager attention scores
// (attn_logit_softcapping, eager_attention_forward). Dividing and
// multiplying by a Python float save nothing; tanh saves its result
// (derivatives.yaml: tanh_backward(grad, result)), so backward holds one
// more tensor of the input's size and dtype, and the forward briefly holds
// two at once. flash-attn applies the attention cap inside its kernel
// (softcap=, flash-attn >= 2.6): no tensor.
func (b *Builder) Softcap(name string, x Value) Value {
	defer b.Scope(name)()
	d := b.Unary("div", x, false, false)
	t := b.Unary("tanh", d, false, true)
	return b.Unary("mul", t, false, false)
}
