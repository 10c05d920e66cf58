package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMistral4 builds transformers' Mistral4ForCausalLM (model_type
// mistral4: Mistral Small 4, mistralai/Mistral-Small-4-119B-2603, whose
// checkpoint wraps it as Mistral3ForConditionalGeneration's text model;
// models/mistral4, 5.25.0). modular_mistral4.py takes DeepSeek-V3's
// layout whole (Mistral4Model and Mistral4ForCausalLM are DeepseekV3Model
// and DeepseekV3ForCausalLM; Mistral4MoE and Mistral4Experts
// DeepseekV3MoE and DeepseekV3Experts: buildRouted) and changes two things:
//
//   - Mistral4Attention is DeepseekV3Attention with q, after the rotation
//     and the concatenation of its nope and rope parts, multiplied by
//     get_llama_4_attn_scale(position_ids, rope_parameters'
//     llama_4_scaling_beta, original_max_position_embeddings), as
//     Ministral 3 scales it (nn.MLA.QPosScale).
//   - Mistral4TopkRouter is a softmax router in the activations' dtype:
//     F.linear(x, weight) with no upcast, router_logits.softmax(-1), the
//     group-limited top-k (DeepSeek-V3's top-2 sum per group) over scores
//     masked off no_grad on a branch no gradient reaches, the weights
//     gathered from the unmasked scores, renormalised when norm_topk_prob
//     (Mistral4Config: true) and times routed_scaling_factor. No
//     correction bias, and Mistral4PreTrainedModel's
//     _keep_in_fp32_modules_strict is empty: from_pretrained keeps
//     nothing fp32 (nn.MoE.SoftmaxInDType).
func buildMistral4(c *hfConfig, attn string, head hfHead) *core.Model {
	at, estimate := deepSeekMLA(c, attn)
	at.QPosScale = true
	rp, ok := c.raw["rope_parameters"].(map[string]any)
	if c.err == nil && ok && rp["llama_4_scaling_beta"] == nil {
		// transformers reads it unchecked (rope_parameters.get), and
		// Mistral4Config's default rope_parameters set it (0.1)
		c.fail("rope_parameters", "has no llama_4_scaling_beta, which Mistral4Attention scales q by")
	}
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, estimate, head)
}

// mistral4MoE is Mistral4MoE's routed block (buildMistral4's doc).
func (c *hfConfig) mistral4MoE(hidden, inter, experts, shared int64, act string) *nn.MoE {
	groups, topGroups := c.sizeOr("n_group", 1), c.sizeOr("topk_group", 1)
	if c.err == nil && (experts%groups != 0 || experts/groups < 2) {
		// view(-1, n_group, experts // n_group).topk(2)
		c.fail("n_group", "must divide n_routed_experts (%d) into groups of at least 2 experts (got %d)", experts, groups)
	}
	if c.err == nil && topGroups > groups {
		c.fail("topk_group", "must be at most n_group (%d) (got %d)", groups, topGroups)
	}
	c.number("routed_scaling_factor", 1)
	return &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts,
		TopK: c.size("num_experts_per_tok"), Act: act, Router: nn.RouterSoftmax, RouterName: "gate", SoftmaxInDType: true,
		NormTopK:      c.flag("norm_topk_prob", true),
		SharedExperts: shared, SharedHidden: inter}
}
