package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGLM4MoE builds transformers' Glm4MoeForCausalLM (model_type
// glm4_moe: GLM-4.5, GLM-4.5-Air, GLM-4.6; modeling_glm4_moe.py, added in
// transformers 4.54): DeepSeek-V3's layout (buildRouted: first_k_dense_replace
// dense layers, then layers of n_routed_experts experts with sigmoid
// routing, the fp32 correction bias and n_shared_experts shared ones;
// Glm4MoeMoE and Glm4MoeTopkRouter are DeepseekV3's, a
// routed_scaling_factor and group-limited selection that hold no tensor)
// with grouped-query attention in place of MLA: q, k and v biased by
// attention_bias, o_proj never; use_qk_norm adds Qwen3's per-head RMS norms
// of q and k (GLM-4.5 sets it, GLM-4.5-Air does not).
//
// partial_rotary_factor rotates the first half of each head's dimensions
// and concatenates the rest: the cat saves nothing, so the rotation is
// lowered over the whole head, as for the other decoders (the factor's
// FLOPs are not counted); the cos and sin every layer saves are as wide as
// the rotated part, and the cat leaves q head major (nn.Attention.RopeCat).
// num_nextn_predict_layers counts the multi-token prediction layer the
// checkpoint holds (GLM-4.5-Air's model.layers.46), which transformers does
// not build; mtp=True adds it as for DeepSeek-V3.
func buildGLM4MoE(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	rotary := ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 0.5))
	c.number("rope_theta", 10000)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: c.flag("attention_bias", false), Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true,
		QKNorm: c.flag("use_qk_norm", false), RopeTables: "rotary_emb", RopeTablesDim: rotary, RopeTablesBatch: c.mrope, RopeCat: true, EagerMask: true}
	return buildRoutedGQA(c, at, head)
}

// buildRoutedGQA is buildRouted behind grouped-query attention at, whose
// q, k, v and o projections estimate the attention's parameters.
func buildRoutedGQA(c *hfConfig, at *nn.Attention, head hfHead) *core.Model {
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, 2*float64(at.Dim)*float64(at.Heads*at.HeadDim)+2*float64(at.Dim)*float64(at.KVHeads*at.HeadDim), head)
}

// buildGLM4 builds transformers' Glm4ForCausalLM (model_type glm4:
// GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1; models/glm4/modeling_glm4.py,
// first in the 4.51.3 patch release). Its decoder layer norms each
// sublayer's input and output (Glm4DecoderLayer at 5.25.0):
//
//	h = x + post_self_attn_layernorm(self_attn(input_layernorm(x)))
//	y = h + post_mlp_layernorm(mlp(post_attention_layernorm(h)))
//
// every norm Llama's RMSNorm (Glm4RMSNorm: the weight times the rows cast
// back). q, k and v are biased by attention_bias (Glm4Config's default
// true), o_proj never; the MLP is Phi-3's one gate_up_proj chunked in two
// (nn.MLP.FusedName: gate and up are views of its one [tokens, 2 x
// intermediate] output, which the activation and the product keep).
// head_dim defaults to 128.
//
// The rotary embedding turns the first partial_rotary_factor (default
// 0.5) of each head and concatenates the rest (RopeCat), and pairs
// adjacent dimensions: apply_rotary_pos_emb repeat_interleaves the first
// half of rotary_emb's cos and sin in every layer, a new pair of
// [1, 1, seq, rotary] tensors that layer's q*cos and rotate_half(q)*sin
// save (RopeTablesEachLayer); rotary_emb's own pair is saved by nothing.
//
// GLM (model_type glm: THUDM/glm-4-9b-chat-hf, glm-4-9b-hf, the "-hf"
// conversions of the GLM-4-9B models; models/glm/modeling_glm.py at
// 5.25.0) is the same decoder with Llama's pre-norm layer: no
// post_self_attn_layernorm or post_mlp_layernorm (GlmDecoderLayer), the
// same attention, rope and fused MLP, and GlmConfig's same defaults.
func buildGLM4(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	rotary := ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 0.5))
	c.object("rope_scaling")
	c.number("rope_theta", 10000)
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	drop, after := c.attnDropout("attention_dropout", c.prob("attention_dropout", 0), 0, "dropout")
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: c.flag("attention_bias", true), Impl: attn, Causal: true, Dropout: drop, Rope: true, SoftmaxFP32: true,
		RopeTables: "rotary_emb", RopeTablesDim: rotary, RopeTablesEachLayer: !c.mrope, RopeTablesBatch: c.mrope, RopeCat: true, EagerMask: true}
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	attnPart := append([]core.Layer{norm("input_layernorm"), at}, after...)
	mlpPart := []core.Layer{norm("post_attention_layernorm"), &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, FusedName: "gate_up_proj"}}
	if c.modelType == "glm4" { // Glm4DecoderLayer's post-norms
		attnPart = append(attnPart, norm("post_self_attn_layernorm"))
		mlpPart = append(mlpPart, norm("post_mlp_layernorm"))
	}
	block := seq(res(attnPart...), res(mlpPart...))
	c.checkTotal(float64(layers)*(2*float64(hidden)*float64(heads*hd)+2*float64(hidden)*float64(kv*hd)+3*float64(hidden)*float64(inter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "layers", Layer: block, N: layers}, norm("norm")}
	return c.finish(head, ls, vocab, tie)
}
