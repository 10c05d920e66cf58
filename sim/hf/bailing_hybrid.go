package hf

import (
	"encoding/json"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildBailingHybrid builds transformers' BailingHybridForCausalLM
// (model_type bailing_hybrid: inclusionAI's Ling 3, whose checkpoints name
// the remote code's BailingMoeV3ForCausalLM; modeling_bailing_hybrid.py at
// 5.25.0). Kimi Linear's layout (kimi_linear.go) with Ling's pieces:
//
//   - linear_attention: Kimi Delta Attention with full-rank gates
//     (nn.KimiDeltaAttention.FullRankGates: f_proj and g_proj), the bounded
//     forget gate when kda_safe_gate (its default), conv1d, dt_bias and
//     A_log kept fp32; num_attention_heads heads of head_dim (default 128),
//     short_conv_kernel_size taps;
//   - full_attention: DeepSeek-V3's MLA with its (interleaved) rotary
//     embedding and a per-head output gate (nn.MLA.HeadGate: g_proj);
//
// layer_types, else full attention at the last layer of every
// layer_group_size (default 6). The MoE is DeepSeek-V3's under the same
// keys as Kimi Linear's (num_experts, num_experts_per_tok,
// num_shared_experts, n_group 8 and topk_group 4 by default) after the
// first first_k_dense_replace layers (default 2) or as mlp_layer_types
// says; a layer's routed and shared experts clamp silu(gate) and up to its
// expert_swiglu_limit_list and share_expert_swiglu_limit_list entries
// (0 or null: none; nn.MoE.LimitAfterAct). The num_mtp_layers MTP layers
// the checkpoints store are not built (BailingHybridModel ignores them on
// load).
func buildBailingHybrid(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	mla, mlaEstimate := deepSeekMLA(c, attn)
	if c.err != nil {
		return nil
	}
	mla.HeadGate = true
	kda := &nn.KimiDeltaAttention{Name: "self_attn", Dim: hidden, Heads: c.size("num_attention_heads"), HeadDim: c.sizeOr("head_dim", 128),
		ConvK: c.sizeOr("short_conv_kernel_size", 4), Chunk: gdnChunk, FullRankGates: true, SafeGate: c.flag("kda_safe_gate", true)}
	layers := c.size("num_hidden_layers")
	full := c.bailingLayerTypes(layers)
	sparse := c.mlpLayerSparse(layers, 2)
	limits := c.swigluLimits(layers, "expert_swiglu_limit_list", "swiglu_limits")
	shared := c.swigluLimits(layers, "share_expert_swiglu_limit_list", "swiglu_limits_shared")
	if c.err != nil {
		return nil
	}
	mlp, moe := c.kdaFeedForward(hidden, sparse, 8, 4, max(mlaEstimate, float64(kda.Params())))
	if c.err != nil {
		return nil
	}
	moes := map[[2]float64]*nn.MoE{} // one block for each pair of limits
	return c.kdaStack(head, kda, mla, full, func(i int) core.Layer {
		if !sparse[i] {
			return mlp
		}
		k := [2]float64{limits[i], shared[i]}
		if moes[k] == nil {
			m := *moe
			m.LimitAfterAct, m.SwiGLULimit, m.SharedSwiGLULimit = true, k[0], k[1]
			moes[k] = &m
		}
		return moes[k]
	})
}

// bailingLayerTypes says which layers are full_attention: layer_types,
// else the last of every layer_group_size (BailingHybridConfig: (i + 1)
// % layer_group_size == 0).
func (c *hfConfig) bailingLayerTypes(layers int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "full_attention", "linear_attention")
	}
	group := c.sizeOr("layer_group_size", 6)
	full := make([]bool, max(layers, 0))
	for i := range full {
		full[i] = int64(i+1)%group == 0
	}
	return full
}

// swigluLimits reads a per-layer list of SwiGLU limits (key, or alias as
// transformers' attribute_map spells it): null or absent is none, else
// one non-negative number a layer (BailingHybridConfig raises on another
// length).
func (c *hfConfig) swigluLimits(layers int64, key, alias string) []float64 {
	out := make([]float64, max(layers, 0))
	key = c.firstKey(key, alias)
	if !c.has(key) {
		return out
	}
	list, ok := c.raw[key].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail(key, "must list one SwiGLU limit per decoder layer (%d; 0 for none), as BailingHybridConfig requires (got %s)", layers, describeJSON(c.raw[key]))
		return out
	}
	for i, v := range list {
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || f < 0 || math.IsInf(f, 0) {
			c.fail(key, "must list non-negative numbers (0 for no clamp; got %s at layer %d)", describeJSON(v), i)
			return out
		}
		out[i] = f
	}
	return out
}
