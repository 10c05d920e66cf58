package hf

import (
	"github.com/memsh/memsh/sim/core"
)

// buildAXK1 builds transformers' AXK1ForCausalLM (model_type axk1: SK
// Telecom's A.X-K1; models/axk1/modular_axk1.py at 5.25.0): DeepSeek-V3
// (buildRouted) whose attention always projects q through its latent
// (AXK1Attention: q_a_proj, q_a_layernorm, q_b_proj; AXK1Config's
// q_lora_rank is an int, 1536 by default, never None) and whose MoE block
// norms its output (AXK1MoE: post_mlp_layernorm, Llama's RMSNorm over
// experts + shared experts, inside the block's module: mlp.post_mlp_layernorm;
// the dense layers' AXK1MLP has none). The layers are mlp_layer_types'
// "dense" and "sparse", else AXK1Config's legacy first_k_dense_replace
// (1 by default) dense layers, then sparse ones (moe_layer_freq other
// than 1 is refused); the published checkpoints' MTP layers are not
// built.
func buildAXK1(c *hfConfig, attn string, head hfHead) *core.Model {
	if c.null("q_lora_rank") {
		c.fail("q_lora_rank", "must be a positive integer (got null): AXK1Config's q_lora_rank is an int, A.X-K1's attention always projects q through the latent")
	}
	at, estimate := deepSeekMLA(c, attn)
	c.mlpLayerTypes()
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, estimate, head)
}

// axk1FirstDense is how many dense layers A.X-K1 has before its MoE
// layers: the leading "dense" entries of mlp_layer_types (mlpLayerTypes
// checks the rest are "sparse"), else first_k_dense_replace, which
// AXK1Config.__post_init__ reads (popped from the legacy keys, 1 by
// default) to make mlp_layer_types.
func (c *hfConfig) axk1FirstDense() int64 {
	if list, ok := c.raw["mlp_layer_types"].([]any); ok {
		n := int64(0)
		for _, v := range list {
			if v != "dense" {
				break
			}
			n++
		}
		return n
	}
	return c.intOr("first_k_dense_replace", 1)
}
