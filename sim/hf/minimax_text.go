package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMiniMax is transformers' MiniMaxForCausalLM (model_type minimax:
// MiniMaxAI/MiniMax-Text-01-hf; models/minimax/modeling_minimax.py at
// 5.25.0). Each layer is
//
//	h = input_layernorm(x)
//	h = h * attn_alpha + self_attn(h) * attn_beta     # the norm's output is the residual
//	h = post_attention_layernorm(h)
//	x = h * mlp_alpha + mlp(h) * mlp_beta
//
// (nn.ScaledResidual), self_attn being, where layer_types says
// "linear_attention", lightning attention (nn.LightningAttention:
// MiniMaxLightningAttention's torch block loop, block_size positions a
// block; its alpha and beta linear_attn_alpha_factor and
// linear_attn_beta_factor), else Mixtral's softmax attention (GQA with
// the rotary embedding on whole heads: MiniMaxRotaryEmbedding reads
// neither rotary_dim nor partial_rotary_factor; full_attn_alpha_factor
// and full_attn_beta_factor), and mlp Mixtral's MoE
// (MiniMaxSparseMoeBlock: a softmax top-k router named gate, the top-k
// weights renormalised, 3-D experts of intermediate_size;
// mlp_alpha_factor and mlp_beta_factor). Without layer_types
// MiniMaxConfig alternates, full attention first. Then norm and an
// untied lm_head. sliding_window (Mixtral's window on the softmax
// layers) and router_jitter_noise are refused; the published config
// sets neither.
func buildMiniMax(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	experts := c.size(c.firstKey("num_local_experts", "num_experts")) // MiniMaxConfig.attribute_map
	topK := c.size("num_experts_per_tok")
	block := c.sizeOr("block_size", 256)
	act := c.mlpAct("hidden_act", "silu", true)
	tie := c.flag("tie_word_embeddings", false)
	c.object("rope_scaling")
	c.number("rope_theta", 1e6) // no size depends on it
	pa := c.prob("attention_dropout", 0)
	if v, ok := c.raw["sliding_window"]; ok && v != nil && c.err == nil {
		c.fail("sliding_window", "is not modelled for model_type \"minimax\" (got %s: Mixtral's window on the softmax layers)", describeJSON(v))
	}
	if j := c.number("router_jitter_noise", 0); j != 0 && c.err == nil {
		c.fail("router_jitter_noise", "= %g is not modelled (the in-place noise on the router's input in training); MiniMax-Text-01 sets 0.0", j)
	}
	factor := func(key string) float64 { return c.number(key, 1) } // MiniMaxConfig: 1
	fullA, fullB := factor("full_attn_alpha_factor"), factor("full_attn_beta_factor")
	linA, linB := factor("linear_attn_alpha_factor"), factor("linear_attn_beta_factor")
	mlpA, mlpB := factor("mlp_alpha_factor"), factor("mlp_beta_factor")
	linear := make([]bool, max(layers, 0))
	if c.has("layer_types") {
		linear = c.layerTypes(layers, "linear_attention", "full_attention")
	} else {
		for i := range linear { // MiniMaxConfig.__post_init__
			linear[i] = (i+1)%2 == 0
		}
	}
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		Rope: true, SoftmaxFP32: true, EagerMask: true, Dropout: pa, ProbsDropoutOnly: pa > 0, RopeTables: "rotary_emb"}
	la := &nn.LightningAttention{Name: "self_attn", Dim: hidden, Heads: heads, HeadDim: hd, Block: block}
	moe := &nn.MoE{Name: "block_sparse_moe", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act, NormTopK: true, WNames: true}
	c.checkLayer(la, nil)
	c.checkLayer(moe, moeKeys(c.firstKey("num_local_experts", "num_experts"), "num_experts_per_tok"))
	c.checkTotal(float64(layers)*(max(float64(at.Params()), float64(la.Params()))+float64(experts)*3*float64(hidden)*float64(inter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	ff := &nn.ScaledResidual{Layer: moe, Alpha: mlpA, Beta: mlpB}
	full := seq(norm("input_layernorm"), &nn.ScaledResidual{Layer: at, Alpha: fullA, Beta: fullB}, norm("post_attention_layernorm"), ff)
	lin := seq(norm("input_layernorm"), &nn.ScaledResidual{Layer: la, Alpha: linA, Beta: linB}, norm("post_attention_layernorm"), ff)
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		blocks[i] = full
		if linear[i] {
			blocks[i] = lin
		}
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}
