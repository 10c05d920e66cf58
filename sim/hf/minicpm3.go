package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
)

// buildMiniCPM3 builds transformers' MiniCPM3ForCausalLM (model_type
// minicpm3: openbmb/MiniCPM3-4B; models/minicpm3, 5.25.0).
// modular_minicpm3.py takes Llama's model, pre-norm decoder layer, RMSNorm
// and SwiGLU MLP (gate_proj, up_proj, down_proj, biased by mlp_bias) and
// DeepSeek-V2's multi-head latent attention (MiniCPM3Attention: q through
// q_a_proj, q_a_layernorm and q_b_proj, or one unbiased q_proj when
// q_lora_rank is null; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj and
// DeepseekV2Attention's expand_kv; o_proj), rotated by Llama's
// apply_rotary_pos_emb on tables of qk_rope_head_dim (DeepSeek-V3's
// non-interleaved rope: nn.MLA as deepSeekMLA builds it), and adds three
// scalings (MiniCPM3Config's defaults scale_emb 12, scale_depth 1.4,
// dim_model_base 256):
//
//	inputs_embeds = embed_tokens(ids) * embed_scale   # Gemma3TextScaledWordEmbedding: a 0-dim buffer of scale_emb
//	x = x + self_attn(input_layernorm(x)) * (scale_depth / sqrt(num_hidden_layers))
//	x = x + mlp(post_attention_layernorm(x)) * (scale_depth / sqrt(num_hidden_layers))
//	logits = lm_head(norm(x) / (hidden_size / dim_model_base))
//
// The embedding's product keeps its 0-dim buffer for the backward
// (nn.Scale.Buffer; the forward holds the product, nn.Scale.Rebinds), the
// residual products are by a Python float and keep nothing, and the
// division before the head (MiniCPM3ForCausalLM.forward only: the base
// model has none) makes the [tokens, hidden] tensor lm_head keeps in place
// of the norm's output. scale_depth and dim_model_base null are
// sqrt(num_hidden_layers) and hidden_size (MiniCPM3Config.__post_init__):
// factors of 1, still multiplied and divided. v_head_dim null is
// hidden_size / num_attention_heads; head_dim is never read
// (__post_init__ sets it to qk_rope_head_dim), nor is num_key_value_heads
// by anything memsh models (MiniCPM3Attention's keys are per head; it
// sets only repeat_kv's group count, which SDPA's path leaves the bytes
// the same with: 2 and 40 measured). Eager attention is refused as for
// every MLA family (noEager), attention_dropout above 0 too (not
// modelled on nn.MLA): buildMLALlama.
func buildMiniCPM3(c *hfConfig, attn string, head hfHead) *core.Model {
	return buildMLALlama(c, attn, head)
}

// minicpm3Factor reads one of MiniCPM3's scalings: a positive finite
// number, def when absent; null is nullAs where MiniCPM3Config's
// __post_init__ gives one (scale_depth, dim_model_base), refused where it
// gives none (scale_emb: the embedding multiplies by it).
func (c *hfConfig) minicpm3Factor(key string, def, nullAs float64) float64 {
	if c.null(key) {
		if nullAs == 0 {
			c.fail(key, "must be a positive number for model_type minicpm3 (got null): MiniCPM3's embedding multiplies by it")
		}
		return nullAs
	}
	v := c.number(key, def)
	if c.err == nil && (!(v > 0) || math.IsInf(v, 0)) {
		c.fail(key, "must be a positive number for model_type minicpm3 (got %g)", v)
	}
	return v
}
