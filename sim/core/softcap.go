package core

// Soft-capping (Gemma 2, transformers models/gemma2/modeling_gemma2.py):
// x -> cap * tanh(x / cap), over the final logits (final_logit_softcapping,
// Gemma2ForCausalLM.forward) and over the eager attention scores
// (attn_logit_softcapping, eager_attention_forward). Dividing and
// multiplying by a Python float save nothing; tanh saves its result
// (derivatives.yaml: tanh_backward(grad, result)), so backward holds one
// more tensor of the input's size and dtype, and the forward briefly holds
// two at once. flash-attn applies the attention cap inside its kernel
// (softcap=, flash-attn >= 2.6): no tensor. The three ops run inline in
// the current module, as transformers computes them in the forward of
// the CausalLM and of the attention (no module of their own), named
// name.div, name.tanh and name.mul.
func (b *Builder) Softcap(name string, x Value) Value {
	d := b.unary("div", JoinName(name, "div"), x, false, false)
	t := b.unary("tanh", JoinName(name, "tanh"), d, false, true)
	return b.unary("mul", JoinName(name, "mul"), t, false, false)
}
