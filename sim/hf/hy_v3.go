package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildHYV3 builds transformers' HYV3ForCausalLM (model_type hy_v3:
// Tencent's Hy3 and Hy3-preview; models/hy_v3, 5.25.0). Its decoder layer
// is DeepSeek-V3's pre-norm one (input_layernorm, post_attention_layernorm)
// around Apertus' attention (HYV3Attention: q_norm and k_norm, Llama's
// RMSNorm over each head of q and k before the rope; every projection,
// o_proj included, biased by attention_bias; head_dim 128 unless set) and
// an MLP that is Llama's (biased by mlp_bias) of intermediate_size where
// mlp_layer_types says "dense" (default: layer 0 only; HYV3Config reads no
// first_k_dense_replace) and HYV3MoE where it says "sparse":
//
//   - HYV3TopKRouter (mlp.gate, a num_experts x hidden_size fp32
//     parameter): F.linear(x.float(), weight.float()), a sigmoid, the top
//     num_experts_per_tok of the scores plus the block's fp32
//     e_score_correction_bias buffer (mlp.e_score_correction_bias), the
//     chosen scores renormalised and times router_scaling_factor: fp32
//     weights;
//   - Qwen3-MoE's 3-D experts of moe_intermediate_size, run by
//     experts_implementation;
//   - one shared_experts MLP of moe_intermediate_size x
//     num_shared_experts (HYV3MLP: a width of 0 falls back to
//     intermediate_size, `intermediate_size or config.intermediate_size`),
//     added to the routed output in fp32 when enable_moe_fp32_combine
//     (default true; nn.MoE.SharedSumFP32).
//
// The router's weight and the bias are kept fp32 by from_pretrained
// (_keep_in_fp32_modules_strict: e_score_correction_bias in every
// release, gate.weight from 5.24). Keys HYV3Config does not read (qk_norm,
// first_k_dense_replace, enable_lm_head_fp32, num_nextn_predict_layers: the
// checkpoints' MTP layer, ignored on load) change nothing, as in
// transformers.
func buildHYV3(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	bias := c.flag("attention_bias", false)
	mlpBias := c.flag("mlp_bias", false)
	pa := c.prob("attention_dropout", 0)
	c.object("rope_parameters")
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: bias, OutBias: bias, QKNorm: true, Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true,
		RopeTables: "rotary_emb", EagerMask: true, Dropout: pa, ProbsDropoutOnly: pa > 0}
	expertsKey := "num_experts"
	if c.has("num_local_experts") {
		if c.has("num_experts") {
			c.fail("num_local_experts", "and \"num_experts\" are both set: HYV3Config reads num_local_experts as num_experts (attribute_map); keep one")
		}
		expertsKey = "num_local_experts"
	}
	experts := c.sizeOr(expertsKey, 192)
	moeInter := c.sizeOr("moe_intermediate_size", 1536)
	if c.null("num_shared_experts") {
		c.fail("num_shared_experts", "must be a count (got null): HYV3MoE multiplies moe_intermediate_size by it")
	}
	shared := c.intOr("num_shared_experts", 1)
	if shared < 0 {
		c.fail("num_shared_experts", "must be 0 or more (got %d)", shared)
	}
	sharedHidden := moeInter * shared
	if sharedHidden == 0 {
		sharedHidden = inter // HYV3MLP: intermediate_size or config.intermediate_size
	}
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: experts,
		TopK: c.sizeOr("num_experts_per_tok", 8), Act: act, Router: nn.RouterSigmoid,
		NormTopK: true, ScoreBias: true, ScoreBiasName: "e_score_correction_bias",
		SharedExperts: 1, SharedHidden: sharedHidden, SharedBias: mlpBias,
		SharedSumFP32: c.flag("enable_moe_fp32_combine", true)}
	c.number("router_scaling_factor", 2.826)
	c.checkLayer(at, nil)
	c.checkLayer(moe, moeKeys(expertsKey, "num_experts_per_tok"))
	sparse := c.sparseLayers(layers, 1)
	c.checkTotal(float64(layers)*(2*float64(hidden)*float64(heads*hd)+2*float64(hidden)*float64(kv*hd)+
		float64(experts)*3*float64(hidden)*float64(moeInter)+3*float64(hidden)*float64(sharedHidden+inter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: mlpBias}
	return c.finish(head, denseOrSparse(hidden, vocab, at, dense, moe, sparse), vocab, tie)
}
