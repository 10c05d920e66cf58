package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildKolibri1 builds transformers' Kolibri1ForCausalLM (model_type
// kolibri1: Aleph-Alpha/Kolibri-1, the checkpoint its docstring loads;
// models/kolibri1/modular_kolibri1.py at 5.25.0):
//
//   - Kolibri1DecoderLayer is Glm4DecoderLayer: each sublayer's input and
//     output normed (input_layernorm, post_self_attn_layernorm,
//     post_attention_layernorm, post_mlp_layernorm; Llama's RMSNorm);
//   - Kolibri1Attention is Exaone4Attention (exaone4Attention): q_norm and
//     k_norm over each head before the rope, unbiased projections, head_dim
//     128 by default; layer_types' sliding_attention layers attend to the
//     last sliding_window (default 513) keys, and with a sliding_window set
//     only they rotate q and k (the full layers' NoPE). Without
//     layer_types every fifth layer is full (Kolibri1Config.__post_init__);
//     a sliding layer without a positive sliding_window is refused, as
//     validate_architecture refuses it;
//   - Kolibri1SparseMoeBlock in every layer: DeepseekV3MoE's routed
//     experts (Qwen3-MoE's 3-D gate_up_proj and down_proj of
//     moe_intermediate_size, experts= as transformers 5 runs them) and one
//     shared_experts MLP of shared_expert_intermediate_size, behind
//     Kolibri1TopKRouter: F.linear of the fp32 input and weight, the top
//     num_experts_per_tok of the logits plus e_score_correction_bias (an
//     fp32 buffer, _keep_in_fp32_modules_strict), the sigmoid of the
//     gathered logits (nn.MoE.SigmoidAfterGather), renormalised when
//     norm_topk_prob (default false): fp32 weights.
//
// Kolibri1Config's defaults (configClasses): 4 kv heads, head_dim 128,
// 384 experts of 512, 6 a token, a shared expert of 512, sliding_window
// 513; its intermediate_size, attention_bias, use_sliding_window,
// decoder_sparse_step and mlp_only_layers are not fields (not read).
func buildKolibri1(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	vocab := c.size("vocab_size")
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	c.object("rope_scaling")
	c.object("rope_parameters")
	window := int64(0)
	if !c.null("sliding_window") {
		window = c.intOr("sliding_window", 0) // Kolibri1Config's 513 (configClasses)
	}
	sliding := make([]bool, max(layers, 0))
	if c.has("layer_types") {
		sliding = c.layerTypes(layers, "sliding_attention", "full_attention")
	} else {
		for i := range sliding {
			sliding[i] = (i+1)%5 != 0
		}
	}
	for _, s := range sliding {
		if s && window <= 0 && c.err == nil {
			c.fail("sliding_window", "must be a positive integer with sliding_attention layers (got %s): Kolibri1Config refuses it (validate_architecture)", describeJSON(c.raw["sliding_window"]))
		}
	}
	if c.err != nil {
		return nil
	}
	full := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		Dropout: c.prob("attention_dropout", 0), Rope: true, SoftmaxFP32: true, QKNorm: true, RopeTables: "rotary_emb", EagerMask: true}
	local := *full
	local.Window = window
	if window > 0 { // Kolibri1Attention: rope where sliding_window is None or the layer slides
		full.Rope, full.RopeTables = false, ""
	}
	experts := c.size("num_experts")
	inter := c.size("moe_intermediate_size")
	shared := c.size("shared_expert_intermediate_size")
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: c.size("num_experts_per_tok"), Act: act,
		Router: nn.RouterSigmoid, SigmoidAfterGather: true, NormTopK: c.flag("norm_topk_prob", false), ScoreBias: true,
		SharedExperts: 1, SharedHidden: shared}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	block := func(at *nn.Attention) core.Layer {
		return seq(res(norm("input_layernorm"), at, norm("post_self_attn_layernorm")),
			res(norm("post_attention_layernorm"), moe, norm("post_mlp_layernorm")))
	}
	blocks := slidingBlocks(sliding, block(full), block(&local))
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+3*float64(hidden)*float64(experts*inter+shared)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}
