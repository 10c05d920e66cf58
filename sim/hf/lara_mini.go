package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildLaraMini builds transformers' LaraMiniForCausalLM (model_type
// lara_mini: translated/Lara-4-Mini-Base; models/lara_mini/
// modular_lara_mini.py at 5.25.0): Qwen3.5's decoder layer
// (input_layernorm, a mixer, post_attention_layernorm, mlp) whose mixer
// is, by layer_types (default: linear, sliding, linear, full, sliding
// over and over, LaraMiniConfig.__post_init__):
//
//   - "linear_attention": Qwen3.5's Gated DeltaNet (linear_attn: four
//     input projections, nn.GatedDeltaNet.SplitProj) whose gated norm is
//     GLM-5-Next's with silu, all in fp32 with the weight's fp32 copy
//     (NormWeightFP32);
//   - "sliding_attention": Qwen3's attention (q, k, v and o biased by
//     attention_bias; num_key_value_heads, default 4; head_dim, default
//     128) with q_norm and k_norm over each head, the rotary embedding,
//     and keys of the last sliding_window (default 512);
//   - "full_attention": the same without any position encoding (the model
//     hands those layers no rotary pair);
//
// and whose mlp, in every layer, is Flint's block: LaraMiniTopKRouter
// (gate: F.linear over x.float() and weight.float(), softmax, top-k,
// renormalised by norm_topk_prob, default true, cast to the hidden
// states' dtype; nn.MoE.RouterFP32), num_experts 3-D experts of
// moe_intermediate_size and an ungated shared_expert of
// shared_expert_intermediate_size added in full. Every RMSNorm (the
// layers', the final norm, q_norm and k_norm) is Helium's: the weight's
// fp32 copy times the fp32 rows before the cast back (nn.Norm.WeightFP32,
// Attention.QKNormWeightFP32). The head is tied by default.
func buildLaraMini(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads) // LaraMiniConfig's 4: configClasses
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	tie := c.flag("tie_word_embeddings", true)
	act := c.mlpAct("hidden_act", "silu", true)
	bias := c.flag("attention_bias", false)
	pa := c.prob("attention_dropout", 0)
	c.object("rope_parameters")
	kinds := c.laraLayerTypes(layers)
	if c.err != nil {
		return nil
	}
	window := c.size("sliding_window")
	gdn := &nn.GatedDeltaNet{Name: "linear_attn", Dim: hidden, KHeads: c.sizeOr("linear_num_key_heads", 8),
		VHeads: c.sizeOr("linear_num_value_heads", 16), KHeadDim: c.sizeOr("linear_key_head_dim", 128),
		VHeadDim: c.sizeOr("linear_value_head_dim", 128), ConvK: c.sizeOr("linear_conv_kernel_dim", 4), Chunk: gdnChunk,
		SplitProj: true, NormWeightFP32: true}
	c.checkLayer(gdn, gatedDeltaNetKeys)
	experts := c.size("num_experts")
	moeInter := c.size("moe_intermediate_size")
	shared := c.size("shared_expert_intermediate_size")
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: experts, TopK: c.size("num_experts_per_tok"), Act: act,
		RouterName: "gate", RouterFP32: true, WeightsHidden: true, NormTopK: c.flag("norm_topk_prob", true),
		SharedExperts: 1, SharedHidden: shared, SharedName: "shared_expert"}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	if c.err != nil {
		return nil
	}
	mixers := map[string]core.Layer{"linear_attention": gdn}
	for _, slide := range []bool{false, true} {
		a := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
			Impl: attn, Causal: true, QKNorm: true, QKNormOlmo2: true, QKNormWeightFP32: true, EagerMask: true, SoftmaxFP32: true,
			Dropout: pa, ProbsDropoutOnly: true}
		kind := "full_attention"
		if slide {
			a.Window, a.Rope, a.RopeTables, kind = window, true, "rotary_emb", "sliding_attention"
		}
		c.checkLayer(a, nil)
		mixers[kind] = a
	}
	mixer := max(float64(gdn.Params()), float64(mixers["full_attention"].Params()))
	c.checkTotal(float64(layers)*(mixer+3*float64(hidden)*float64(experts*moeInter+shared)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true, WeightFP32: true} }
	built := map[string]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i, k := range kinds {
		if built[k] == nil {
			built[k] = seq(res(norm("input_layernorm"), mixers[k]), res(norm("post_attention_layernorm"), moe))
		}
		blocks[i] = built[k]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// laraLayerTypes reads layer_types ("linear_attention",
// "sliding_attention", "full_attention"), else LaraMiniConfig's
// default: linear, sliding, linear, full, sliding, repeated.
func (c *hfConfig) laraLayerTypes(layers int64) []string {
	if layers > core.MaxLayers {
		return nil // c.err's already
	}
	out := make([]string, layers)
	if !c.has("layer_types") {
		pattern := []string{"linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention"}
		for i := range out {
			out[i] = pattern[i%len(pattern)]
		}
		return out
	}
	list, ok := c.raw["layer_types"].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("layer_types", "must list one layer type per layer (%d)", layers)
		return nil
	}
	for i, v := range list {
		s, _ := v.(string)
		switch s {
		case "linear_attention", "sliding_attention", "full_attention":
			out[i] = s
		default:
			c.fail("layer_types", "names a layer type memsh does not know (got %s; known: linear_attention, sliding_attention, full_attention)", describeJSON(v))
			return nil
		}
	}
	return out
}
