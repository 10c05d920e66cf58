package hf

import "github.com/memsh/memsh/sim/nn"

// deepSeekV2MoE is the routed block of a DeepSeek-V2 MoE layer.
// DeepSeek-V2 (model_type deepseek_v2: DeepSeek-V2-Lite, DeepSeek-V2,
// DeepSeek-V2.5, DeepSeek-Coder-V2) is built as transformers 5.25.0 builds DeepseekV2ForCausalLM (models/deepseek_v2/modeling_deepseek_v2.py)
// on DeepSeek-V3's layout (buildDeepSeek: nn.MLA, first_k_dense_replace
// dense layers, then MoE layers with shared experts), with its own router:
//
//   - DeepseekV2TopkRouter: an fp32 weight [n_routed_experts, hidden]
//     applied with F.linear(x.float(), weight.float()), softmax in fp32,
//     top-k (topk_method "greedy"; "group_limited_greedy" first zeroes
//     the experts outside the topk_group best of n_group groups), the
//     weights times routed_scaling_factor. No e_score_correction_bias,
//     and no renormalisation: the 5.25.0 router never reads
//     norm_topk_prob (every DeepSeek-V2 config sets it false).
//   - DeepseekV2Experts: 3-D gate_up_proj and down_proj run by
//     experts_implementation, the fp32 top-k weights applied to each
//     expert's output (hfExperts.weightsFP32), as DeepseekV3Experts.
//
// DeepseekV2Attention rotates q_pe and k_pe as complex numbers
// (apply_rotary_emb: view_as_complex over fp32 copies) and builds the key
// by copying into new_empty (expand_kv), where nn.MLA lowers DeepSeek-V3's
// rotate_half and cat: one layer keeps the same bytes under both model
// types in transformers 5.25.0 (TestDeepSeekV2LayerSavesAsTransformers).
func (c *hfConfig) deepSeekV2MoE(hidden, inter, experts, shared int64, act string) *nn.MoE {
	method := c.str("topk_method", "greedy")
	switch method {
	case "greedy":
	case "group_limited_greedy":
		groups := c.size("n_group")
		c.size("topk_group")
		if c.err == nil && experts%groups != 0 {
			c.fail("n_group", "must divide n_routed_experts (%d) for topk_method \"group_limited_greedy\" (got %d)", experts, groups)
		}
	default:
		c.fail("topk_method", "must be \"greedy\" or \"group_limited_greedy\" for model_type deepseek_v2 (got %q)", method)
	}
	c.number("routed_scaling_factor", 1)
	c.flag("norm_topk_prob", false)
	return &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts,
		TopK: c.size("num_experts_per_tok"), Act: act, Router: nn.RouterSoftmax, RouterFP32: true, ParamRouter: true,
		GroupLimited:  method == "group_limited_greedy",
		SharedExperts: shared, SharedHidden: inter}
}
