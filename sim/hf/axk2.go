package hf

import (
	"github.com/memsh/memsh/sim/core"
)

// buildAXK2 builds transformers' AXK2ForCausalLM (model_type axk2: SK
// Telecom's A.X-K2 and A.X-K2-Light; models/axk2/modular_axk2.py at
// 5.25.0): DeepSeek-V3.2 (multi-head latent attention with DeepSeek
// Sparse Attention's indexer in every layer, whatever layer_types says;
// buildRouted's dense then MoE layers, as A.X-K1's: axk1FirstDense) with
// two changes:
//
//   - AXK2Attention (nn.MLA.QGate): no q_b_proj; q_gate_proj maps
//     torch.cat([q_a_layernorm(q_a_proj(x)), q_a_proj(x)]) to each head's
//     q and a v_head_dim gate, and the attention's output is multiplied
//     by sigmoid(gate.float()) before o_proj;
//   - AXK2GatedRMSNorm (nn.GatedNorm) as input_layernorm in every layer
//     and as post_attention_layernorm in the MoE layers: the normed rows
//     times the sigmoid of a low-rank (gated_norm_rank) MLP of them.
//
// The router (AXK2TopkRouter) is DeepSeek-V3's, its fp32 logits from the
// fp32-cast rows, and picks within the topk_group best of n_group groups
// where n_group is set (A.X-K2-Light sets none): the selection is
// no-grad and keeps nothing. n_group without topk_group (or the other
// way round) is refused, as AXK2Config refuses it.
func buildAXK2(c *hfConfig, attn string, head hfHead) *core.Model {
	if c.null("q_lora_rank") {
		c.fail("q_lora_rank", "must be a positive integer (got null): A.X-K2's indexer and output gate read the q latent (AXK2Config.validate_architecture)")
	}
	if c.has("n_group") != c.has("topk_group") && c.err == nil {
		c.fail("n_group", "and \"topk_group\" must be set together, or both left out or null (AXK2Config.validate_architecture)")
	}
	at, estimate := deepSeekMLA(c, attn)
	at.QGate = true
	at.Indexer = dsaIndexer(c)
	c.checkLayer(at, mlaKeys)
	c.mlpLayerTypes()
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, estimate, head)
}
