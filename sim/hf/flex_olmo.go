package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildFlexOlmo builds transformers' FlexOlmoForCausalLM (model_type
// flex_olmo: AI2's FlexOlmo-7x7B-1T and its variants;
// models/flex_olmo/modeling_flex_olmo.py at 5.25.0): OLMo 2's model
// (olmo2Stack: q_norm and k_norm over q_proj's and k_proj's whole outputs,
// rotary tables in fp32, the post-sublayer norms post_attention_layernorm
// and post_feedforward_layernorm, Olmo2RMSNorm everywhere, untied head by
// default) whose MLP is OLMoE's sparse block, FlexOlmoSparseMoeBlock:
// FlexOlmoTopKRouter (mlp.gate, a weight [num_experts, hidden]: F.linear,
// softmax in fp32, top-k, renormalised when norm_topk_prob, cast back)
// and FlexOlmoExperts (3-D gate_up_proj and down_proj of
// intermediate_size, run by experts_implementation; setExperts).
// num_experts (num_local_experts reads the same: FlexOlmoConfig's
// attribute_map) defaults to 7, num_experts_per_tok to 5.
func buildFlexOlmo(c *hfConfig, attn string, head hfHead) *core.Model {
	return c.olmo2Stack(attn, head, func(hidden, inter int64, act string) (core.Layer, float64) {
		key := "num_experts"
		if !c.has(key) && c.has("num_local_experts") {
			key = "num_local_experts"
		}
		experts := c.sizeOr(key, 7)
		m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: c.sizeOr("num_experts_per_tok", 5), Act: act,
			NormTopK: c.flag("norm_topk_prob", false)}
		c.checkLayer(m, moeKeys(key, "num_experts_per_tok"))
		return m, float64(experts) * 3 * float64(hidden) * float64(inter)
	})
}
