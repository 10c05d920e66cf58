package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// IBM's Granite 3.x decoders (transformers' GraniteForCausalLM, model_type
// granite; GraniteMoeForCausalLM, granitemoe) are Llama's and Mixtral's
// layouts with muP-style multipliers (models/granite/modeling_granite.py,
// models/granitemoe/modeling_granitemoe.py at 5.25.0):
//
//	inputs_embeds = embed_tokens(ids) * embedding_multiplier
//	x = x + self_attn(input_layernorm(x)) * residual_multiplier
//	x = x + mlp(post_attention_layernorm(x)) * residual_multiplier
//	logits = lm_head(norm(x)) / logits_scaling
//
// and the attention scaled by attention_multiplier in place of
// 1/sqrt(head_dim). Each multiplier is a Python float, applied whatever
// its value (1.0 too): the product is a new tensor of its input's size
// and dtype, and autograd keeps nothing for it (MulBackward0 and
// DivBackward0 with a scalar keep the scalar). So the multipliers add
// transient tensors, not saved ones: the embedding's product replaces the
// lookup's output as the tensor the model holds through its layers
// (nn.Scale.Rebinds), each branch's product lives until the residual add,
// and the logits' quotient is a second [tokens, vocab] tensor while the
// division runs (core.Model.LogitScale).

// graniteMultipliers are the config's muP multipliers.
type graniteMultipliers struct {
	embed, resid, logits float64
}

// graniteMultipliers reads embedding_multiplier, residual_multiplier,
// logits_scaling and attention_multiplier (GraniteConfig's defaults,
// 1.0), each a positive finite number. attention_multiplier replaces the
// attention's 1/sqrt(head_dim) scale, which moves no memory.
func (c *hfConfig) graniteMultipliers() graniteMultipliers {
	c.multiplier("attention_multiplier")
	return graniteMultipliers{embed: c.multiplier("embedding_multiplier"), resid: c.multiplier("residual_multiplier"),
		logits: c.multiplier("logits_scaling")}
}

// multiplier reads a muP multiplier (Granite's, Falcon-H1's): a positive
// finite number, 1.0 when absent.
func (c *hfConfig) multiplier(key string) float64 {
	v := c.number(key, 1)
	if c.err == nil && (!(v > 0) || math.IsInf(v, 0)) {
		c.fail(key, "must be a positive number (got %g)", v)
	}
	return v
}

func (g graniteMultipliers) embedding() core.Layer {
	return &nn.Scale{Name: "embedding_multiplier", Factor: g.embed, Rebinds: true}
}

func (g graniteMultipliers) residual() core.Layer {
	return &nn.Scale{Name: "residual_multiplier", Factor: g.resid}
}

// graniteMoE is GraniteMoeMoE (and GraniteMoeHybridMoE):
// GraniteMoeTopKRouter, a weight [experts, hidden] whose logits are
// upcast to fp32, their top-k, a softmax over the k cast back to the
// hidden states' dtype (nn.MoE.TopKLogitsFP32); GraniteMoeExperts,
// gate_up_proj [experts, 2*intermediate, hidden] and down_proj without
// biases, run by experts_implementation from 5.0 (setExperts). 4.x's
// ParallelExperts (input_linear, output_linear) loop over the same 3-D
// weights, routed by GraniteMoeTopKGating's nn.Linear router.layer
// (PEFT's all-linear adapts it; 5.x's router is a parameter it does not).
func (c *hfConfig) graniteMoE(hidden int64, act string) (*nn.MoE, float64) {
	inter := c.size("intermediate_size")
	experts := c.size("num_local_experts")
	m := &nn.MoE{Name: "block_sparse_moe", Dim: hidden, Hidden: inter, Experts: experts,
		TopK: c.size("num_experts_per_tok"), Act: act, Impl: nn.MoEFusedLoop, Router: nn.RouterTopKSoftmax,
		TopKLogitsFP32: true, LinearRouter: true, RouterName: "router.layer"} // 4.x's GraniteMoeTopKGating.layer, an nn.Linear (5.x: setExperts)
	c.checkLayer(m, moeKeys("num_local_experts", "num_experts_per_tok"))
	return m, float64(experts) * 3 * float64(hidden) * float64(inter)
}

// graniteMoEShared is GraniteMoeSharedDecoderLayer's feed-forward part
// (models/granitemoeshared/modeling_granitemoeshared.py at 5.25.0):
// GraniteMoe's block_sparse_moe (graniteMoE) and, beside it on the same
// input, shared_mlp, a GraniteMoeSharedMLP (input_linear to twice
// shared_intermediate_size, chunked, act(first) * second, output_linear;
// nn.FusedGLU), the two outputs summed before the residual multiplier;
// with shared_intermediate_size 0 (GraniteMoeSharedConfig's default) no
// shared_mlp, GraniteMoe's layer.
func (c *hfConfig) graniteMoEShared(hidden int64, act string) (core.Layer, float64) {
	moe, estimate := c.graniteMoE(hidden, act)
	inter := c.intOr("shared_intermediate_size", 0)
	if inter == 0 || c.err != nil {
		return moe, estimate
	}
	shared := &nn.FusedGLU{Name: "shared_mlp", Dim: hidden, Hidden: inter, Act: act}
	c.checkLayer(shared, map[nn.Field]string{nn.FieldHidden: "shared_intermediate_size"})
	return &nn.Parallel{Branches: []core.Layer{moe, shared}}, estimate + float64(shared.Params())
}
