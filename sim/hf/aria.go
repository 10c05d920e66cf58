package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// ariaMoE is Aria's text model's sparse block (AriaTextMoELayer,
// models/aria/modular_aria.py at 5.25.0), in every layer:
//
//   - AriaTextTopKRouter: a weight [moe_num_experts, hidden] (no bias),
//     the top moe_topk logits, a softmax over those k in the logits' dtype
//     (nn.RouterTopKSoftmax without a bias);
//   - AriaExperts: gate_up_proj [experts, hidden, 2 x intermediate_size]
//     and down_proj [experts, intermediate_size, hidden], stored as
//     grouped_mm reads them (is_transposed), always SiLU-gated;
//   - AriaSharedExpertsMLP: one Llama MLP (shared_experts: gate_proj,
//     up_proj, down_proj, biased by mlp_bias) moe_num_shared_experts x
//     intermediate_size wide, over every token, added to the experts'
//     output.
//
// The shared MLP's activation is hidden_act while the experts' is always
// SiLU: memsh models one for both, so a hidden_act other than silu is
// refused (Aria's is silu). moe_num_shared_experts 0 is refused: the
// block still builds a shared MLP 0 wide (and, with mlp_bias, its
// down_proj's bias).
func (c *hfConfig) ariaMoE(hidden int64, act string) (core.Layer, float64) {
	inter := c.size("intermediate_size")
	experts := c.sizeOr("moe_num_experts", 8)
	shared := c.sizeOr("moe_num_shared_experts", 2)
	if act != "swiglu" && c.err == nil {
		c.fail("hidden_act", "%q is not modelled for Aria: its routed experts are always SiLU-gated and its shared experts follow hidden_act, "+
			"which memsh lowers with one activation (Aria's is silu)", c.str("hidden_act", "silu"))
	}
	m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: c.sizeOr("moe_topk", 2), Act: act,
		Router: nn.RouterTopKSoftmax, SharedExperts: 1, SharedHidden: inter * shared, SharedBias: c.flag("mlp_bias", false)}
	c.checkLayer(m, moeKeys("moe_num_experts", "moe_topk"))
	return m, float64(experts+shared) * 3 * float64(hidden) * float64(inter)
}
