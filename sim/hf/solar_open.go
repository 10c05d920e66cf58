package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildSolarOpen builds transformers' SolarOpenForCausalLM (model_type
// solar_open: Upstage's Solar-Open-100B; models/solar_open, 5.25.0).
// modular_solar_open.py takes GLM-4.5's model, MoE block and router
// (Glm4MoeModel, Glm4MoeMoE, DeepSeek-V3's sigmoid router with the
// correction bias and n_shared_experts shared experts: buildRouted) but
// Llama's decoder layer and attention: every layer an MoE layer
// (SolarOpenDecoderLayer builds SolarOpenMoE whatever the index;
// SolarOpenConfig has no intermediate_size or first_k_dense_replace, so a
// file's are not read), grouped-query attention of head_dim (default 128)
// with q, k and v biased by attention_bias and o_proj never, the whole
// head rotated, no q or k norm.
func buildSolarOpen(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	if f := c.rotaryFactor("partial_rotary_factor", 1); c.err == nil && f != 1 {
		// LlamaAttention's apply_rotary_pos_emb turns whole heads
		c.fail("partial_rotary_factor", "must be 1 for model_type solar_open (got %g): LlamaAttention rotates the whole head", f)
	}
	c.number("rope_theta", 1_000_000)
	pa := c.prob("attention_dropout", 0)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: c.flag("attention_bias", false), Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true,
		RopeTables: "rotary_emb", EagerMask: true, Dropout: pa, ProbsDropoutOnly: pa > 0}
	return buildRoutedGQA(c, at, head)
}
