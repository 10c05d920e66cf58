package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildCohere2Moe builds transformers' Cohere2MoeForCausalLM (model_type
// cohere2_moe; models/cohere2_moe/modular_cohere2_moe.py at 5.25.0):
// Cohere 2's parallel layer (buildCohere2: h = input_layernorm(x); y = x
// + self_attn(h) + mlp(h); logits times logit_scale, tied by default)
// with these differences:
//
//   - head_dim is the config's (Cohere2MoeConfig's default 128);
//   - every norm is Llama's RMSNorm when rms_norm_eps is set, Cohere's
//     LayerNorm (a weight, no bias, fp32) when it is null (the default);
//   - the MLP is dense (Cohere2MoeMLP of prefix_dense_intermediate_size,
//     else intermediate_size) where mlp_layer_types says "dense" (default:
//     the first first_k_dense_replace layers), else Cohere2MoeSparseMoeBlock:
//     Cohere2MoeTopKRouter (mlp.gate: the top num_experts_per_tok of
//     num_experts logits, softmaxed in fp32, cast back:
//     nn.MoE.TopKSoftmaxFP32), Mixtral's experts run by
//     experts_implementation, and num_shared_experts (default 0) shared
//     ones as one MLP (shared_experts) of that many times
//     intermediate_size, summed with the routed output or averaged with
//     it (shared_expert_combination_strategy, "average" by default:
//     nn.MoE.SharedAverage);
//   - without layer_types the first first_k_dense_replace layers slide by
//     prefix_dense_sliding_window_pattern (1: none), the rest by
//     sliding_window_pattern (4); a sliding layer rotates q and k, and so
//     does a dense one when prefix_dense_sliding_window_pattern is 1
//     (Cohere2MoeAttention.force_rope).
//
// expert_selection_fn "sigmoid" (the top-k logits through a sigmoid,
// renormalised by norm_topk_prob) is refused: not modelled.
func buildCohere2Moe(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	k := c.cohereKeys()
	tie, bias, act, drop, scale := k.tie, k.bias, k.act, k.drop, k.scale
	var window int64
	if !c.null("sliding_window") {
		window = c.sizeOr("sliding_window", 4096)
	}
	firstDense := c.intOr("first_k_dense_replace", 0)
	sliding := c.cohere2MoeSliding(layers, firstDense)
	sparse := c.sparseLayers(layers, firstDense)
	prefixOne := c.sizeOr("prefix_dense_sliding_window_pattern", 1) == 1
	switch fn := c.str("expert_selection_fn", "softmax"); {
	case c.err != nil:
	case fn == "sigmoid":
		c.err = &units.Error{Msg: fmt.Sprintf("%q = \"sigmoid\" is not modelled for model_type %q (the sigmoid over the top-k logits, renormalised by norm_topk_prob)", c.at("expert_selection_fn"), c.modelType),
			Hint: `Cohere2MoeConfig's default is "softmax"; set it so to count the model with the softmax router`}
	case fn != "softmax":
		c.fail("expert_selection_fn", "must be \"softmax\" or \"sigmoid\" (got %q; Cohere2MoeTopKRouter raises otherwise)", fn)
	}
	average := false
	switch s := c.str("shared_expert_combination_strategy", "average"); {
	case c.err != nil:
	case s == "average":
		average = true
	case s != "sum":
		c.fail("shared_expert_combination_strategy", "must be \"sum\" or \"average\" (got %q; Cohere2MoeSparseMoeBlock raises otherwise)", s)
	}
	shared := c.intOr("num_shared_experts", 0)
	experts := c.sizeOr("num_experts", 8)
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: c.sizeOr("num_experts_per_tok", 2), Act: act,
		Router: nn.RouterTopKSoftmax, RouterName: "gate", TopKSoftmaxFP32: true,
		SharedExperts: shared, SharedHidden: inter, SharedAverage: average && shared > 0}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	denseInter := c.sizeOr("prefix_dense_intermediate_size", inter)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer {
		if c.has("rms_norm_eps") {
			return &nn.Norm{Name: name, Dim: hidden, RMS: true}
		}
		return &nn.CohereNorm{Name: name, Dim: hidden}
	}
	type kind struct{ slide, sparse bool }
	made := map[kind]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := kind{sliding[i], sparse[i]}
		if made[k] == nil {
			at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
				Impl: attn, Causal: true, Dropout: drop, SoftmaxFP32: true, EagerMask: true}
			if k.slide && window > 0 {
				at.Window = window
			}
			if at.Window > 0 || !k.sparse && prefixOne { // a window, or force_rope
				at.Rope, at.RopeTables = true, "rotary_emb"
			}
			var ff core.Layer = moe
			if !k.sparse {
				ff = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: denseInter, Act: act}
			}
			made[k] = res(norm("input_layernorm"), &nn.Parallel{Branches: []core.Layer{at, ff}})
		}
		blocks[i] = made[k]
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+3*float64(experts+shared)*float64(hidden)*float64(inter)+3*float64(hidden)*float64(denseInter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.LogitScale = 1 / scale // Model.LogitScale divides; Cohere2MoeForCausalLM multiplies
	}
	return m
}

// cohere2MoeSliding lists the sliding layers: layer_types, else
// Cohere2MoeConfig.__post_init__'s two patterns, the first firstDense
// layers by prefix_dense_sliding_window_pattern, the rest by
// sliding_window_pattern, each layer i of a run full where (i + 1) is a
// multiple of its pattern.
func (c *hfConfig) cohere2MoeSliding(layers, firstDense int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	out := make([]bool, max(layers, 0))
	pp, p := c.sizeOr("prefix_dense_sliding_window_pattern", 1), c.sizeOr("sliding_window_pattern", 4)
	if c.err != nil {
		return out
	}
	for i := range out {
		j, q := int64(i), p
		if j < firstDense {
			q = pp
		} else {
			j -= firstDense
		}
		out[i] = (j+1)%q != 0
	}
	return out
}
