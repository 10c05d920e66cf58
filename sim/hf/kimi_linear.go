package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildKimiLinear builds transformers' KimiLinearForCausalLM (model_type
// kimi_linear: Moonshot AI's Kimi-Linear-48B-A3B-Base and -Instruct;
// modeling_kimi_linear.py at 5.25.0, first in the 5.17.0 wheel). Two
// layer kinds, both self_attn under Llama's pre-norm residuals:
//
//   - full_attention: DeepSeek-V3's multi-head latent attention without
//     any rotary embedding (KimiLinearAttention "with NoPE":
//     nn.MLA.NoRope; KimiLinearModel deletes its rotary_emb, whatever
//     mla_use_nope, rope_theta or rope_scaling say);
//   - linear_attention: Kimi Delta Attention (nn.KimiDeltaAttention) as
//     transformers runs it without flash-linear-attention, its torch
//     chunk kernel.
//
// layer_types names them, else linear_attn_config's full_attn_layers and
// kda_layers (1-based, as the checkpoints list them), else
// KimiLinearConfig's pattern (full_attention at every fourth layer from
// the fifth, i % 4 == 0 for i > 0). The linear layers' sizes come from
// linear_attn_config (num_heads, head_dim, short_conv_kernel_size), else
// linear_num_heads, linear_head_dim and linear_conv_kernel_dim.
//
// The feed-forward is dense (intermediate_size) where mlp_layer_types
// says "dense", else for the first first_k_dense_replace layers (default
// 1), and DeepSeek-V3's MoE elsewhere (KimiLinearMoE: num_experts of
// moe_intermediate_size, num_experts_per_token a token, sigmoid scores
// with the correction bias, moe_renormalize, one shared MLP of
// num_shared_experts x moe_intermediate_size); transformers' attribute_map
// reads the DeepSeek spellings (n_routed_experts aside: num_local_experts,
// num_experts_per_tok, n_shared_experts, norm_topk_prob, n_group) too.
// The router is sigmoid whatever moe_router_activation_func says, and
// moe_layer_freq is not read, as in transformers.
func buildKimiLinear(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	mla, mlaEstimate := deepSeekMLA(c, attn)
	if c.err != nil {
		return nil
	}
	mla.NoRope, mla.RopeTables = true, ""
	kda := c.kimiDelta(hidden)
	layers := c.size("num_hidden_layers")
	full := c.kimiLayerTypes(layers)
	sparse := c.mlpLayerSparse(layers, 1)
	if c.err != nil {
		return nil
	}
	mlp, moe := c.kdaFeedForward(hidden, sparse, 1, 1, max(mlaEstimate, float64(kda.Params())))
	if c.err != nil {
		return nil
	}
	return c.kdaStack(head, kda, mla, full, func(i int) core.Layer {
		if sparse[i] {
			return moe
		}
		return mlp
	})
}

// kdaFeedForward makes the dense MLP and the MoE the layers of Kimi
// Linear's layout need (sparse: which are MoE; groups, topkGroup the MoE
// defaults: kimiMoE) and checks the model's size, mixer the larger
// mixer's parameter estimate.
func (c *hfConfig) kdaFeedForward(hidden int64, sparse []bool, groups, topkGroup int64, mixer float64) (mlp *nn.MLP, moe *nn.MoE) {
	act := c.mlpAct("hidden_act", "silu", true)
	estimate := 0.0
	for _, s := range sparse {
		switch {
		case s && moe == nil:
			moe = c.kimiMoE(hidden, act, groups, topkGroup)
			c.checkLayer(moe, moeKeys(c.firstKey("num_experts", "num_local_experts"), c.firstKey("num_experts_per_token", "num_experts_per_tok")))
			estimate = max(estimate, float64(moe.Experts+moe.SharedExperts)*3*float64(hidden)*float64(moe.Hidden))
		case !s && mlp == nil:
			inter := c.size("intermediate_size")
			mlp, estimate = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}, max(estimate, 3*float64(hidden)*float64(inter))
		}
	}
	c.checkTotal(float64(len(sparse))*(mixer+estimate) + 2*float64(c.size("vocab_size"))*float64(hidden))
	return mlp, moe
}

// kdaStack finishes Kimi Linear's layout (Ling 3's too): the embedding,
// Llama pre-norm layers of the linear mixer kda or, where full says, the
// attention mla, with layer i's feed-forward ff(i) (one block for each
// distinct pair), the final norm and the head.
func (c *hfConfig) kdaStack(head hfHead, kda, mla core.Layer, full []bool, ff func(i int) core.Layer) *core.Model {
	hidden, vocab := c.size("hidden_size"), c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	c.prob("attention_dropout", 0)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	made := map[[2]core.Layer]core.Layer{}
	blocks := make([]core.Layer, len(full))
	for i := range blocks {
		mixer := kda
		if full[i] {
			mixer = mla
		}
		k := [2]core.Layer{mixer, ff(i)}
		if made[k] == nil {
			made[k] = seq(res(norm("input_layernorm"), mixer), res(norm("post_attention_layernorm"), k[1]))
		}
		blocks[i] = made[k]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// kimiDelta reads the linear layers' sizes: linear_attn_config's, as
// KimiLinearConfig.__post_init__ takes them over the top-level keys.
func (c *hfConfig) kimiDelta(hidden int64) *nn.KimiDeltaAttention {
	la := c.linearAttnConfig()
	a := &nn.KimiDeltaAttention{Name: "self_attn", Dim: hidden,
		Heads:   la.sizeOr("num_heads", c.sizeOr("linear_num_heads", 32)),
		HeadDim: la.sizeOr("head_dim", c.sizeOr("linear_head_dim", 128)),
		ConvK:   la.sizeOr("short_conv_kernel_size", c.sizeOr("linear_conv_kernel_dim", 4)),
		Chunk:   gdnChunk}
	if c.err == nil {
		c.err = la.err
	}
	return a
}

// linearAttnConfig is linear_attn_config (an empty one when absent); its
// first bad field fails c.
func (c *hfConfig) linearAttnConfig() *hfConfig {
	if !c.has("linear_attn_config") {
		return &hfConfig{raw: map[string]any{}, modelType: c.modelType, prefix: c.at("linear_attn_config.")}
	}
	la := c.sub("linear_attn_config")
	la.err = c.err
	return la
}

// kimiLayerTypes says which layers are full_attention: layer_types, else
// linear_attn_config's lists (both needed, 1-based; a layer in both is
// a linear one, the later assignment in KimiLinearConfig.__post_init__),
// else every fourth from the fifth.
func (c *hfConfig) kimiLayerTypes(layers int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "full_attention", "linear_attention")
	}
	full := make([]bool, max(layers, 0))
	la := c.linearAttnConfig()
	if !la.has("full_attn_layers") || !la.has("kda_layers") {
		for i := range full {
			full[i] = i > 0 && i%4 == 0
		}
		return full
	}
	const what = "layer numbers (1-based, as Kimi Linear's checkpoints number them)"
	fullSet, kdaSet := la.layerList("full_attn_layers", 1, layers, what), la.layerList("kda_layers", 1, layers, what)
	if la.err != nil {
		c.err = la.err
		return full
	}
	for i := range full {
		full[i] = fullSet[int64(i)] && !kdaSet[int64(i)]
		if !fullSet[int64(i)] && !kdaSet[int64(i)] {
			la.fail("kda_layers", "and full_attn_layers leave layer %d out (1-based; transformers' KimiLinearModel fails on a layer of neither kind)", i+1)
			la.err.Hint = fmt.Sprintf("list each layer 1..%d in kda_layers or full_attn_layers, as Kimi-Linear-48B-A3B's config.json does", len(full))
			c.err = la.err
			return full
		}
	}
	return full
}

// mlpLayerSparse says which layers are MoE: mlp_layer_types ("dense" or
// "sparse" a layer), else all but the first first_k_dense_replace
// (default denseDefault: KimiLinearConfig's 1, BailingHybridConfig's 2).
func (c *hfConfig) mlpLayerSparse(layers, denseDefault int64) []bool {
	sparse := make([]bool, max(layers, 0))
	if !c.has("mlp_layer_types") {
		dense := c.intOr("first_k_dense_replace", denseDefault)
		for i := range sparse {
			sparse[i] = int64(i) >= dense
		}
		return sparse
	}
	list, ok := c.raw["mlp_layer_types"].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("mlp_layer_types", "must list \"dense\" or \"sparse\" for each of the %d layers", layers)
		return sparse
	}
	for i, v := range list {
		switch v {
		case "sparse":
			sparse[i] = true
		case "dense":
		default:
			c.fail("mlp_layer_types", "%s", fmt.Sprintf("layer %d is %s: each entry is \"dense\" or \"sparse\"", i, describeJSON(v)))
			return sparse
		}
	}
	return sparse
}

// kimiMoE is KimiLinearMoE, DeepSeek-V3's block under Kimi's key names
// (or the DeepSeek ones transformers' attribute_map maps to them), which
// Ling 3's BailingHybridMoE shares; groups and topkGroup are the
// config class's num_expert_group and topk_group defaults.
func (c *hfConfig) kimiMoE(hidden int64, act string, groups, topkGroup int64) *nn.MoE {
	experts := c.firstSize("num_experts", "num_local_experts")
	inter := c.size("moe_intermediate_size")
	groups = c.sizeOr(c.firstKey("num_expert_group", "n_group"), groups)
	if c.err == nil && experts%groups != 0 {
		c.fail(c.firstKey("num_expert_group", "n_group"), "must divide num_experts (%d) for the router's group scores (got %d)", experts, groups)
	}
	if tg := c.sizeOr("topk_group", topkGroup); c.err == nil && tg > groups {
		c.fail("topk_group", "must be at most num_expert_group (%d) (got %d)", groups, tg)
	}
	return &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts,
		TopK: c.sizeOr(c.firstKey("num_experts_per_token", "num_experts_per_tok"), 8), Act: act, Router: nn.RouterSigmoid,
		NormTopK: c.flag(c.firstKey("moe_renormalize", "norm_topk_prob"), true), ScoreBias: true,
		SharedExperts: c.intOr(c.firstKey("num_shared_experts", "n_shared_experts"), 1), SharedHidden: inter}
}

// kdaFP32Since is the first release whose from_pretrained keeps Kimi
// Linear's dt_bias fp32 in a bf16 or fp16 model (the 5.24.0 wheel's
// KimiLinearPreTrainedModel lists it in _keep_in_fp32_modules_strict;
// 5.17.0 to 5.23.0 have no such list).
var kdaFP32Since = [2]int{5, 24}

// setKDA sets, for transformers v, whether the Kimi Delta Attention
// layers keep dt_bias fp32.
func setKDA(layers []core.Layer, v [2]int) {
	walkLayers(layers, func(l core.Layer) {
		if a, ok := l.(*nn.KimiDeltaAttention); ok {
			a.DTBiasFP32 = atLeast(v, kdaFP32Since)
		}
	})
}

// walkLayers calls f on every layer under layers, children after parents.
func walkLayers(layers []core.Layer, f func(core.Layer)) {
	for _, l := range layers {
		f(l)
		walkLayers(l.Children(), f)
	}
}
