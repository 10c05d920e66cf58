package hf

import "github.com/memsh/memsh/sim/core"

// buildYoutu builds transformers' YoutuForCausalLM (model_type youtu:
// tencent/Youtu-LLM-2B; models/youtu, 5.25.0). modular_youtu.py takes
// Llama's model, pre-norm decoder layer, RMSNorm and causal-LM head,
// Qwen3's SwiGLU MLP (gate_proj, up_proj, down_proj, never biased) and
// DeepSeek-V3's multi-head latent attention whole (YoutuAttention is
// DeepseekV3Attention: q through q_a_proj, q_a_layernorm and q_b_proj, or
// one unbiased q_proj when q_lora_rank is null; kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj, expand_kv; o_proj; the rope interleaved by
// rope_interleave, default true, which keeps the same bytes as
// rotate_half: nn.MLA): buildMLALlama without MiniCPM3's scalings. A key
// config.json leaves out is YoutuConfig's default (configClasses:
// q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
// qk_rope_head_dim 64, v_head_dim 128, intermediate_size 6144; the head
// tied). v_head_dim null is refused: kv_b_proj's width adds it
// (transformers raises a TypeError). YoutuConfig drops DeepseekV3Config's
// MoE keys: every layer's MLP is dense.
func buildYoutu(c *hfConfig, attn string, head hfHead) *core.Model {
	if c.null("v_head_dim") {
		c.fail("v_head_dim", "must be a positive integer for model_type youtu (got null): YoutuAttention's kv_b_proj is num_attention_heads x (qk_nope_head_dim + v_head_dim) wide")
		return nil
	}
	return buildMLALlama(c, attn, head)
}
