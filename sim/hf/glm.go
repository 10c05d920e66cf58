package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGLM4MoE builds transformers' Glm4MoeForCausalLM (model_type
// glm4_moe: GLM-4.5, GLM-4.5-Air, GLM-4.6; modeling_glm4_moe.py, added in
// transformers 4.54): DeepSeek-V3's layout (buildRouted: first_k_dense_replace
// dense layers, then layers of n_routed_experts experts with sigmoid
// routing, the fp32 correction bias and n_shared_experts shared ones;
// Glm4MoeMoE and Glm4MoeTopkRouter are DeepseekV3's, a
// routed_scaling_factor and group-limited selection that hold no tensor)
// with grouped-query attention in place of MLA: q, k and v biased by
// attention_bias, o_proj never; use_qk_norm adds Qwen3's per-head RMS norms
// of q and k (GLM-4.5 sets it, GLM-4.5-Air does not).
//
// partial_rotary_factor rotates the first half of each head's dimensions
// and concatenates the rest: the cat saves nothing, so the rotation is
// lowered over the whole head, as for the other decoders (the factor's
// FLOPs are not counted); the cos and sin every layer saves are as wide as
// the rotated part, and the cat leaves q head major (nn.Attention.RopeCat).
// num_nextn_predict_layers counts the multi-token prediction layer the
// checkpoint holds (GLM-4.5-Air's model.layers.46), which transformers does
// not build; mtp=True adds it as for DeepSeek-V3.
func buildGLM4MoE(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	rotary := ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 0.5))
	c.number("rope_theta", 10000)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: c.flag("attention_bias", false), Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true,
		QKNorm: c.flag("use_qk_norm", false), RopeTables: "rotary_emb", RopeTablesDim: rotary, RopeCat: true, EagerMask: true}
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, 2*float64(hidden)*float64(heads*hd)+2*float64(hidden)*float64(kv*hd), head)
}
