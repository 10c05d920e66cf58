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
	return c.lfm2Stack(attn, head, false)
}

// buildLFM2MoE is Lfm2MoeForCausalLM (model_type lfm2_moe:
// LiquidAI/LFM2-8B-A1B; models/lfm2_moe/modeling_lfm2_moe.py at 5.25.0):
// LFM2's layers (layer_types required: Lfm2MoeConfig makes no default),
// the first num_dense_layers (2) with a SwiGLU feed_forward of
// intermediate_size as is, the others an MoE feed_forward
// (Lfm2MoeSparseMoeBlock): num_experts experts of moe_intermediate_size,
// num_experts_per_tok per token, picked by Lfm2MoeTopKRouter (gate: a
// sigmoid of F.linear in the activations' dtype, the top-k of scores +
// the expert_bias buffer under use_expert_bias, the selected scores
// renormalised under norm_topk_prob, times routed_scaling_factor).
func buildLFM2MoE(c *hfConfig, attn string, head hfHead) *core.Model {
	return c.lfm2Stack(attn, head, true)
}

// lfm2Stack builds either: moe reads lfm2_moe's keys and defaults.
func (c *hfConfig) lfm2Stack(attn string, head hfHead, moe bool) *core.Model {
	hiddenDef := int64(2560) // Lfm2Config's default
	if moe {
		hiddenDef = 2048 // Lfm2MoeConfig's
	}
	hidden := c.sizeOr("hidden_size", hiddenDef)
	layers := c.sizeOr("num_hidden_layers", 32)
	vocab := c.sizeOr("vocab_size", 65536)
	heads := c.sizeOr("num_attention_heads", 32)
	kv := c.sizeOr("num_key_value_heads", 8) // the configs' default
	if c.err == nil && heads%kv != 0 {
		c.fail("num_key_value_heads", "(%d) must divide the %d attention heads", kv, heads)
	}
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	c.object("rope_parameters")
	tie := c.flag("tie_word_embeddings", true)
	if c.has("tie_embedding") {
		tie = c.flag("tie_embedding", true)
	}
	var attnAt []bool
	if moe {
		attnAt = c.layerTypes(layers, "full_attention", "conv")
	} else {
		attnAt = c.lfm2AttentionLayers(layers)
	}
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		Rope: true, SoftmaxFP32: true, QKNorm: true, QKNormNames: [2]string{"q_layernorm", "k_layernorm"},
		OutName: "out_proj", EagerMask: true, RopeTables: "rotary_emb"}
	conv := &nn.ShortConv{Name: "conv", Dim: hidden, ConvK: c.sizeOr("conv_L_cache", 3), Bias: c.flag("conv_bias", false)}
	var dense *nn.MLP
	var sparse *nn.MoE
	estimateFF := 0.0
	if moe {
		dense = &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: c.sizeOr("intermediate_size", 7168), Act: "swiglu", GateName: "w1", InName: "w3", OutName: "w2"}
		sparse = c.lfm2MoE(hidden)
		if c.err != nil {
			return nil
		}
		estimateFF = float64(sparse.Params())
	} else {
		dense = &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: c.lfm2FFWidth(), Act: "swiglu", GateName: "w1", InName: "w3", OutName: "w2"}
	}
	estimateFF = math.Max(estimateFF, 3*float64(hidden)*float64(dense.Hidden))
	c.checkTotal(float64(layers)*(math.Max(float64(conv.Params()), float64(at.Params()))+estimateFF) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	firstSparse := layers
	if moe {
		firstSparse = c.intOr("num_dense_layers", 2)
	}
	blocks := hybridBlocks(layers, func(i int64) [2]bool { return [2]bool{attnAt[i], i >= firstSparse} },
		[2]core.Layer{conv, at}, [2]core.Layer{dense, sparse}, [2]string{"operator_norm", "ffn_norm"}, hidden)
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "embedding_norm", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}

// lfm2MoE is Lfm2MoeSparseMoeBlock (buildLFM2MoE); setExperts picks the
// experts' implementation.
func (c *hfConfig) lfm2MoE(hidden int64) *nn.MoE {
	m := &nn.MoE{Name: "feed_forward", Dim: hidden, Hidden: c.sizeOr("moe_intermediate_size", 1792),
		Experts: c.sizeOr("num_experts", 32), TopK: c.sizeOr("num_experts_per_tok", 4), Act: "swiglu",
		Router: nn.RouterSigmoid, SigmoidInDType: true, NormTopK: c.flag("norm_topk_prob", true),
		ScoreBias: c.flag("use_expert_bias", true), ScoreBiasName: "expert_bias"}
	c.number("routed_scaling_factor", 1) // a scalar product: nothing kept
	c.checkLayer(m, moeKeys("num_experts", "num_experts_per_tok"))
	return m
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
