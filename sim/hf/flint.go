package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildFlint builds transformers' FlintForCausalLM (model_type flint:
// RecursiveSI/flint; models/flint/modular_flint.py at 5.25.0), Qwen3-MoE's
// decoder (Qwen3MoeDecoderLayer: input_layernorm, self_attn,
// post_attention_layernorm, mlp) with:
//
//   - FlintRMSNorm, gpt-oss's: (weight * x32_normed).to(dtype)
//     (nn.Olmo2Norm), for the layers' norms, the final norm and each
//     head's q_norm and k_norm (QKNormOlmo2);
//   - FlintAttention: num_attention_heads query heads of head_dim (default
//     128) over num_key_value_heads (default 4), q, k and v biased by
//     attention_bias, o_proj too (Qwen3MoeAttention); the rotary embedding
//     on the layers layer_types calls "sliding_attention" alone, whose
//     queries see the last sliding_window keys (default 513), the
//     "full_attention" ones without position encoding (default: the first
//     two layers, every fourth from layer 1 and the last; FlintConfig.
//     __post_init__); a sink a head on every layer, in fp32
//     (_keep_in_fp32_modules_strict); eager only (FlintPreTrainedModel.
//     _supports_sdpa False; its flash paths are vLLM's FlashAttention 3 and
//     FlashAttention 4), whose scores are fp32 products of q and k cast to
//     fp32 and whose softmax takes the sinks without a row max
//     (nn.Attention.QKFP32, SinksNoShift);
//   - the MLP: FlintMLP (Qwen3-MoE's gated one) of intermediate_size on
//     the layers in mlp_only_layers (default [0, 1]) or off
//     decoder_sparse_step, else FlintSparseMoeBlock: FlintTopKRouter (an
//     fp32 gate.weight kept fp32, F.linear over x.float() with autocast
//     off, top-k of the sigmoid scores without a selection bias,
//     renormalised by norm_topk_prob (default true), fp32 weights),
//     num_experts 3-D experts of moe_intermediate_size, and an ungated
//     shared_expert of shared_expert_intermediate_size added in full after
//     them.
func buildFlint(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.size("head_dim")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	bias := c.flag("attention_bias", false)
	pa := c.prob("attention_dropout", 0)
	c.object("rope_parameters")
	sliding := make([]bool, max(layers, 0))
	if c.has("layer_types") {
		sliding = c.layerTypes(layers, "sliding_attention", "full_attention")
	} else {
		for i := range sliding {
			sliding[i] = !(i < 2 || i%4 == 1 || int64(i) == layers-1) // FlintConfig.__post_init__
		}
	}
	window := c.size("sliding_window")
	experts := c.size("num_experts")
	step := max(c.sizeOr("decoder_sparse_step", 1), 1)
	only := map[int64]bool{0: true, 1: true} // FlintConfig.__post_init__'s [0, 1]
	if c.has("mlp_only_layers") {
		only = c.intList("mlp_only_layers", layers)
	}
	sparse := make([]bool, max(layers, 0))
	for i := range sparse {
		sparse[i] = !only[int64(i)] && (int64(i)+1)%step == 0
	}
	moeInter := c.size("moe_intermediate_size")
	shared := c.size("shared_expert_intermediate_size")
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: experts, TopK: c.size("num_experts_per_tok"), Act: act,
		Router: nn.RouterSigmoid, RouterName: "gate", NormTopK: c.flag("norm_topk_prob", true), KeepRouterFP32: true,
		SharedExperts: 1, SharedHidden: shared, SharedName: "shared_expert"}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	if c.err != nil {
		return nil
	}
	attns := map[bool]*nn.Attention{}
	for _, slide := range []bool{false, true} {
		a := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
			Impl: attn, Causal: true, QKNorm: true, QKNormOlmo2: true, EagerMask: true, QKFP32: true, SoftmaxFP32: true,
			Sinks: true, SinksNoShift: true, KeepSinksFP32: true, Dropout: pa, ProbsDropoutOnly: true}
		if slide {
			a.Window, a.Rope, a.RopeTables = window, true, "rotary_emb"
		}
		c.checkLayer(a, nil)
		attns[slide] = a
	}
	estimate := 2 * float64(vocab) * float64(hidden)
	for i := range sliding {
		ff := 3 * float64(hidden) * float64(inter)
		if sparse[i] {
			ff = 3 * float64(hidden) * float64(experts*moeInter+shared)
		}
		estimate += float64(attns[sliding[i]].Params()) + ff
	}
	c.checkTotal(estimate)
	if c.err != nil {
		return nil
	}
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	norm := func(name string) core.Layer { return &nn.Olmo2Norm{Name: name, Dim: hidden} }
	blocks := windowedMoEBlocks(sliding, sparse, attns, dense, moe, norm)
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}
