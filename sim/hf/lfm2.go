package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// LFM2 (model_type lfm2: LiquidAI/LFM2-350M, -700M, -1.2B, -2.6B and the
// LFM2.5 checkpoints; models/lfm2/modeling_lfm2.py at transformers
// 5.25.0) is Lfm2ForCausalLM: under "model", embed_tokens, layers of
//
//	x + mixer(operator_norm(x)); x + feed_forward(ffn_norm(x))
//
// the mixer a gated short convolution (conv, nn.ShortConv) or, at the
// layers layer_types names full_attention (without layer_types, those
// full_attn_idxs lists; without either, every layer), GQA attention
// (self_attn: q_layernorm and k_layernorm per head before rope, out_proj,
// no biases, no dropout); feed_forward a SwiGLU MLP (w1, w3, w2) whose
// width Lfm2MLP derives from intermediate_size (lfm2FFWidth); then the
// final norm, which LFM2 calls embedding_norm, and the head, tied by
// default. The config's legacy keys win as Lfm2Config.__post_init__ pops
// them: block_ff_dim over intermediate_size, tie_embedding over
// tie_word_embeddings.
func buildLFM2(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("hidden_size", 2560)
	layers := c.sizeOr("num_hidden_layers", 32)
	vocab := c.sizeOr("vocab_size", 65536)
	heads := c.sizeOr("num_attention_heads", 32)
	kv := c.sizeOr("num_key_value_heads", 8) // Lfm2Config's default
	if c.err == nil && heads%kv != 0 {
		c.fail("num_key_value_heads", "(%d) must divide the %d attention heads", kv, heads)
	}
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	c.object("rope_parameters")
	tie := c.flag("tie_word_embeddings", true)
	if c.has("tie_embedding") {
		tie = c.flag("tie_embedding", true)
	}
	ff := c.lfm2FFWidth()
	attnAt := c.lfm2AttentionLayers(layers)
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		Rope: true, SoftmaxFP32: true, QKNorm: true, QKNormNames: [2]string{"q_layernorm", "k_layernorm"},
		OutName: "out_proj", EagerMask: true, RopeTables: "rotary_emb"}
	conv := &nn.ShortConv{Name: "conv", Dim: hidden, ConvK: c.sizeOr("conv_L_cache", 3), Bias: c.flag("conv_bias", false)}
	mlp := &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: ff, Act: "swiglu", GateName: "w1", InName: "w3", OutName: "w2"}
	c.checkTotal(float64(layers)*(math.Max(float64(conv.Params()), float64(at.Params()))+float64(mlp.Params())) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	convBlock := seq(res(norm("operator_norm"), conv), res(norm("ffn_norm"), mlp))
	attnBlock := seq(res(norm("operator_norm"), at), res(norm("ffn_norm"), mlp))
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		blocks[i] = convBlock
		if attnAt[i] {
			blocks[i] = attnBlock
		}
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("embedding_norm")}
	return c.finish(head, ls, vocab, tie)
}

// lfm2FFWidth is Lfm2MLP's width: block_ff_dim (else intermediate_size,
// 12288 by default); with block_auto_adjust_ff_dim (default true)
// int(2 x it / 3), and when block_ffn_dim_multiplier is not null (1.0 by
// default) int(multiplier x that) rounded up to a multiple of
// block_multiple_of (256). LFM2-1.2B: 12288 -> 8192.
func (c *hfConfig) lfm2FFWidth() int64 {
	key := "intermediate_size"
	if c.has("block_ff_dim") {
		key = "block_ff_dim"
	}
	ff := c.sizeOr(key, 12288)
	if !c.flag("block_auto_adjust_ff_dim", true) {
		return ff
	}
	ff = int64(float64(2*ff) / 3)
	if v, ok := c.raw["block_ffn_dim_multiplier"]; ok && v == nil {
		return ff // null: no multiplier, no rounding
	}
	mult := c.number("block_ffn_dim_multiplier", 1)
	if c.err == nil && (mult <= 0 || mult*float64(ff) > 1<<40) {
		c.fail("block_ffn_dim_multiplier", "must be positive and not too large (got %g)", mult)
		return 1
	}
	ff = int64(mult * float64(ff))
	of := c.sizeOr("block_multiple_of", 256)
	ff = of * ((ff + of - 1) / max(of, 1))
	if c.err == nil && ff <= 0 {
		c.fail(key, "gives Lfm2MLP no width (int(2 x %d / 3) is 0)", c.sizeOr(key, 12288))
	}
	return ff
}

// lfm2AttentionLayers reads which layers are attention: layer_types
// ("full_attention" or "conv"), else full_attn_idxs, else every layer
// (Lfm2Config.__post_init__).
func (c *hfConfig) lfm2AttentionLayers(layers int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "full_attention", "conv")
	}
	out := make([]bool, max(layers, 0))
	if !c.has("full_attn_idxs") {
		for i := range out {
			out[i] = true
		}
		return out
	}
	idx := c.intList("full_attn_idxs", layers)
	for i := range out {
		out[i] = idx[int64(i)]
	}
	return out
}
