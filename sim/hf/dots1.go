package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildDots1 builds transformers' Dots1ForCausalLM (model_type dots1:
// rednote-hilab/dots.llm1.base and .inst; models/dots1/modeling_dots1.py
// at 5.25.0, first in the 4.53.0 wheel): DeepSeek-V3's layout (buildRouted:
// first_k_dense_replace dense layers of intermediate_size, then
// n_routed_experts experts of moe_intermediate_size behind
// DeepseekV3TopkRouter's fp32 sigmoid with the correction bias, and
// n_shared_experts shared ones; Dots1TopkRouter, Dots1MoE and
// Dots1DecoderLayer are DeepSeek-V3's, Dots1Config's norm_topk_prob
// defaulting to false) with Qwen3's attention in place of MLA
// (Dots1Attention: q_norm and k_norm over each head before the rope,
// q, k, v and o biased by attention_bias, head_dim hidden_size /
// num_attention_heads unless set) and Qwen3's sliding layers: those
// layer_types names sliding_attention, by default the layers from
// max_window_layers on when sliding_window is set (Dots1Config; its
// defaults, 4096 and 62, slide none of the published 62 layers).
func buildDots1(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	c.number("rope_theta", 10000)
	pa := c.prob("attention_dropout", 0)
	full := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: c.flag("attention_bias", false), OutBias: c.flag("attention_bias", false), Impl: attn, Causal: true,
		Dropout: pa, ProbsDropoutOnly: true, Rope: true, SoftmaxFP32: true, QKNorm: true,
		RopeTables: "rotary_emb", EagerMask: true}
	sliding := c.dots1Sliding(layers)
	local := *full
	local.Window = c.sizeOr("sliding_window", 4096)
	if c.err != nil {
		return nil
	}
	atFor := func(i int64) core.Layer {
		if i < int64(len(sliding)) && sliding[i] {
			return &local
		}
		return full
	}
	return buildRoutedAt(c, atFor, 2*float64(hidden)*float64(heads*hd)+2*float64(hidden)*float64(kv*hd), head)
}

// dots1Sliding is Dots1Config's layer_types: config.json's, else
// sliding_attention from max_window_layers (default 62) on when
// sliding_window (default 4096) is not null.
func (c *hfConfig) dots1Sliding(layers int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	out := make([]bool, max(layers, 0))
	if v, ok := c.raw["sliding_window"]; ok && v == nil {
		return out
	}
	from := c.intOr("max_window_layers", 62)
	for i := range out {
		out[i] = int64(i) >= from
	}
	return out
}
