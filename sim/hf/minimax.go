package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// MiniMax-M2 (model_type minimax_m2: MiniMaxAI/MiniMax-M2, -M2.1, -M2.5;
// models/minimax_m2/modeling_minimax_m2.py at 5.25.0) is Mixtral's
// decoder (buildDecoder) with:
//
//   - MiniMaxM2Attention: q_norm and k_norm, Llama's RMSNorm over
//     q_proj's and k_proj's whole outputs (num_attention_heads x head_dim
//     and num_key_value_heads x head_dim wide) before the heads are split,
//     whatever use_qk_norm and qk_norm_type say (transformers reads
//     neither); no biases; head_dim 128 unless set; a partial rotary
//     embedding (Glm4Moe's: the first rotary_dim of each head turned, the
//     rest concatenated back), rotary_dim being the published configs'
//     spelling of partial_rotary_factor x head_dim
//     (MiniMaxM2Config.convert_rope_params_to_dict);
//   - MiniMaxM2SparseMoeBlock in every layer: MiniMaxM2TopKRouter (gate,
//     a num_local_experts x hidden_size parameter applied in the
//     activations' dtype, a sigmoid over the logits cast to fp32, the top
//     num_experts_per_tok of the scores plus the block's
//     e_score_correction_bias buffer, the chosen scores renormalised:
//     fp32 weights) and Mixtral's 3-D experts of intermediate_size; no
//     shared expert. Nothing is kept fp32 by from_pretrained (the class
//     lists no _keep_in_fp32_modules; checked: a bf16 load makes the gate
//     and the bias bf16).
//
// The published checkpoints' MTP modules (num_mtp_modules) are not built
// by transformers, nor by memsh.
func (c *hfConfig) minimaxMoE(hidden int64, act string) (*nn.MoE, float64) {
	inter := c.size("intermediate_size")
	expertsKey := c.firstKey("num_local_experts", "num_experts") // MiniMaxM2Config.attribute_map
	experts := c.sizeOr(expertsKey, 256)
	topK := c.sizeOr("num_experts_per_tok", 8)
	if j := c.number("router_jitter_noise", 0); j != 0 && c.err == nil {
		c.err = &units.Error{Msg: fmt.Sprintf("%q = %g is not modelled for model_type %q (the in-place noise on the router's input in training)", c.at("router_jitter_noise"), j, c.modelType),
			Hint: `the MiniMax-M2 checkpoints set "router_jitter_noise": 0.0; set it so to count the model without the noise`}
	}
	m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act,
		Router: nn.RouterSigmoid, NormTopK: true, ScoreBias: true, ScoreBiasName: "e_score_correction_bias",
		SigmoidLogitsFP32: true}
	c.checkLayer(m, moeKeys(expertsKey, "num_experts_per_tok"))
	return m, float64(experts) * 3 * float64(hidden) * float64(inter)
}

// minimaxRotary is the width of MiniMax-M2's rotary tables for heads of
// hd: rotary_dim when config.json sets it, else partial_rotary_factor
// (default 1) of hd.
func (c *hfConfig) minimaxRotary(hd int64) int64 {
	if c.has("rotary_dim") {
		r := c.sizeOr("rotary_dim", hd)
		if r > hd && c.err == nil {
			c.fail("rotary_dim", "(%d) must be at most head_dim (%d)", r, hd)
		}
		return ropeWidth(hd, float64(min(r, hd))/float64(max(hd, 1)))
	}
	return ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 1))
}
