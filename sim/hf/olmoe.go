package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// OLMoE (model_type olmoe: allenai/OLMoE-1B-7B-0924 and -0125;
// models/olmoe/modeling_olmoe.py at transformers 5.25.0) is a Llama-style
// pre-norm decoder (buildDecoder) with two differences:
//
//   - OlmoeAttention norms q_proj's and k_proj's whole outputs before the
//     heads are split and rotated: q_norm = OlmoeRMSNorm(hidden_size),
//     k_norm = OlmoeRMSNorm(hidden_size / num_attention_heads *
//     num_key_value_heads), Llama's RMSNorm (the weight times the input
//     dtype's rows): nn.Attention.QKNormWide with QKNormWideLlama.
//   - every layer's mlp is OlmoeSparseMoeBlock: OlmoeTopKRouter (a weight
//     of num_experts x hidden_size named gate, an fp32 softmax, top-k,
//     renormalised when norm_topk_prob) and OlmoeExperts of
//     intermediate_size each (3-D gate_up_proj and down_proj), no shared
//     expert: Qwen3MoeSparseMoeBlock's code, the experts
//     intermediate_size wide rather than moe_intermediate_size.
//
// The head is untied by default (OlmoeConfig.tie_word_embeddings false).

// olmoeAttention checks what OlmoeAttention's shapes need: its norms are
// sized from hidden_size and num_attention_heads, so a head_dim other
// than hidden_size / num_attention_heads cannot run; clip_qkv's in-place
// clamps are not modelled.
func (c *hfConfig) olmoeAttention(hidden, heads, hd int64) {
	if c.err != nil {
		return
	}
	if c.has("head_dim") && heads > 0 && hd != hidden/heads {
		c.err = &units.Error{Msg: fmt.Sprintf("%q (%d) must be hidden_size / num_attention_heads (%d) for model_type %q", c.at("head_dim"), hd, hidden/heads, c.modelType),
			Hint: "OlmoeAttention sizes q_norm and k_norm from hidden_size: drop head_dim from config.json"}
		return
	}
	if v, ok := c.raw["clip_qkv"]; ok && v != nil {
		c.err = &units.Error{Msg: fmt.Sprintf("%q = %s is not modelled for model_type %q (the in-place clamps of q, k and v)", c.at("clip_qkv"), describeJSON(v), c.modelType),
			Hint: `the OLMoE checkpoints set "clip_qkv": null; set it so to count the model without the clamps`}
	}
}

// olmoeMoE is OlmoeSparseMoeBlock. transformers 5 maps
// num_local_experts to num_experts (OlmoeConfig.attribute_map), which
// config.json files write.
func (c *hfConfig) olmoeMoE(hidden int64, act string) (core.Layer, float64) {
	expertsKey := "num_experts"
	if !c.has(expertsKey) && c.has("num_local_experts") {
		expertsKey = "num_local_experts"
	}
	inter := c.size("intermediate_size")
	experts := c.sizeOr(expertsKey, 64) // OlmoeConfig.num_experts
	topK := c.sizeOr("num_experts_per_tok", 8)
	m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act,
		NormTopK: c.flag("norm_topk_prob", false)}
	c.checkLayer(m, moeKeys(expertsKey, "num_experts_per_tok"))
	return m, float64(experts) * 3 * float64(hidden) * float64(inter)
}
