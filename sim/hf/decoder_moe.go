package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// decoderMoE is the sparse block of the MoE families and which layers
// have it (sparse), with an estimate of its parameters for checkTotal.
func (c *hfConfig) decoderMoE(f decoderFamily, hidden, layers int64, act string, sparse []bool) (core.Layer, float64) {
	all := func() {
		for i := range sparse {
			sparse[i] = true
		}
	}
	switch f.moe {
	case "mixtral":
		// MixtralSparseMoeBlock (and PhimoeSparseMoeBlock): an nn.Linear
		// router named gate, experts w1 (gate), w3 (up), w2 (down), top-k
		// weights renormalised.
		inter := c.size("intermediate_size")
		experts := c.size("num_local_experts")
		all()
		m := &nn.MoE{Name: "block_sparse_moe", Dim: hidden, Hidden: inter, Experts: experts,
			TopK: c.size("num_experts_per_tok"), Act: act, NormTopK: true, WNames: true}
		if c.modelType == "phimoe" {
			// PhimoeSparseMoeBlock routes by sparsemixer, two experts a
			// token whatever num_experts_per_tok says (4.57.0 calls it
			// without top_k, 5.25.0 passes it and never reads it:
			// modeling_phimoe.py). With input_jitter_noise > 0 (0.01 in
			// Phi-3.5-MoE's config, 0.0 PhimoeConfig's default) the block
			// and then its router multiply the input in place by uniform
			// noise in training, each saving its noise (nn.MoE.Jitter).
			m.SparseMixer, m.NormTopK, m.TopK = true, false, 2
			m.Jitter = c.number("input_jitter_noise", 0) > 0
		}
		c.checkLayer(m, moeKeys("num_local_experts", "num_experts_per_tok"))
		return m, float64(experts) * 3 * float64(hidden) * float64(inter)
	case "qwen2_moe", "qwen3_moe", "mellum":
		// Qwen2MoeSparseMoeBlock: gate (nn.Linear), experts, and a
		// shared_expert times sigmoid(shared_expert_gate(x));
		// Qwen3MoeSparseMoeBlock has no shared expert.
		// transformers 5 maps Qwen3MoeConfig.num_experts to
		// num_local_experts (attribute_map in configuration_qwen3_moe.py
		// at 5.17.0), so config.to_dict() writes the latter; the hub's
		// configs and transformers 4.x write num_experts.
		expertsKey := "num_experts"
		if f.moe != "qwen2_moe" && c.has("num_local_experts") {
			expertsKey = "num_local_experts"
		}
		experts := c.sizeOr(expertsKey, 0)
		if f.mellum { // mlp_layer_types, all sparse by default (MellumConfig)
			copy(sparse, c.sparseLayers(layers, 0))
		} else {
			// max: a step below 1 is c.err's already, read back as 0
			step := max(c.sizeOr("decoder_sparse_step", 1), 1)
			only := c.intList("mlp_only_layers", layers)
			for i := range sparse {
				sparse[i] = experts > 0 && !only[int64(i)] && (int64(i)+1)%step == 0
			}
		}
		if experts == 0 {
			return nil, 0
		}
		moeInter := c.size("moe_intermediate_size")
		m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: experts,
			TopK: c.size("num_experts_per_tok"), Act: act, NormTopK: c.flag("norm_topk_prob", false)}
		c.checkLayer(m, moeKeys(expertsKey, "num_experts_per_tok"))
		estimate := float64(experts) * 3 * float64(hidden) * float64(moeInter)
		if f.moe == "qwen2_moe" {
			shared := c.size("shared_expert_intermediate_size")
			m.SharedExperts, m.SharedHidden, m.SharedGate = 1, shared, true
			estimate += 3 * float64(hidden) * float64(shared)
		}
		return m, estimate
	case "granitemoe":
		all()
		return c.graniteMoE(hidden, act)
	case "granitemoeshared":
		all()
		return c.graniteMoEShared(hidden, act)
	case "olmoe":
		all()
		return c.olmoeMoE(hidden, act)
	case "aria":
		all()
		return c.ariaMoE(hidden, act)
	case "ernie4_5_moe":
		// Ernie4_5_MoeSparseMoeBlock in the layers from
		// moe_layer_start_index to moe_layer_end_index (-1: the last)
		// every moe_layer_interval-th: an fp32 softmax router whose
		// moe_statics bias steers the top-k, the gathered probabilities
		// renormalised over clamp(sum, norm_min) and cast to the hidden
		// states' dtype, Mixtral's experts, and moe_num_shared_experts
		// shared ones as one MLP (shared_experts) of that many times
		// moe_intermediate_size.
		experts := c.sizeOr("moe_num_experts", 64)
		start := c.intOr("moe_layer_start_index", 1)
		end := layers - 1 // Ernie4_5_MoeConfig: -1 (the default) is the last layer
		if c.number("moe_layer_end_index", -1) != -1 {
			end = c.intOr("moe_layer_end_index", end)
		}
		step := max(c.sizeOr("moe_layer_interval", 1), 1)
		for i := range sparse {
			n := int64(i)
			sparse[i] = (n+1)%step == 0 && n >= start && n <= end
		}
		inter := c.sizeOr("moe_intermediate_size", 1536)
		shared := c.intOr("moe_num_shared_experts", 2)
		m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: c.sizeOr("moe_k", 6), Act: act,
			NormTopK: true, NormMin: true, RouterFP32: true, WeightsHidden: true, StaticsBias: true,
			KeepRouterFP32: true} // _keep_in_fp32_modules_strict: "gate" (4.54 to 4.57), "gate.weight" (5.x)
		if shared > 0 {
			m.SharedExperts, m.SharedHidden, m.SharedBias = 1, inter*shared, c.flag("use_bias", false)
		}
		c.checkLayer(m, moeKeys("moe_num_experts", "moe_k"))
		return m, float64(experts) * 3 * float64(hidden) * float64(inter)
	case "hunyuan_v1_moe":
		all()
		return c.hunyuanMoE(hidden, layers, act)
	case "minimax_m2":
		all()
		return c.minimaxMoE(hidden, act)
	case "gpt_oss":
		// GptOssMLP: GptOssTopKRouter (a weight and a bias, top-k of the
		// logits then a softmax over the k) and GptOssExperts: gate_up_proj
		// [experts, hidden, 2 * intermediate] and down_proj with biases,
		// 3-D parameters looped over per expert in training (4.57.1) or
		// by experts="eager" (5.x), or run by grouped_mm; every one
		// through the clamped GLU of GptOssExperts._apply_gate (4.57.1's
		// loop computes it inline), TestGptOssEagerExpertsAsTransformers.
		inter := c.size("intermediate_size")
		experts := c.size("num_local_experts")
		all()
		m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts,
			TopK: c.size("num_experts_per_tok"), Act: act, Impl: nn.MoEFusedLoop, Router: nn.RouterTopKSoftmax,
			RouterBias: true, ExpertBias: true, ClampedGLU: true}
		c.checkLayer(m, moeKeys("num_local_experts", "num_experts_per_tok"))
		return m, float64(experts) * 3 * float64(hidden) * float64(inter)
	}
	return nil, 0
}

// denseOrSparse is a pre-norm decoder's layers (hy_v3's, minicpm5_moe's):
// embed_tokens, then layers of RMS-normed attention at and feed-forward,
// moe where sparse says so and dense elsewhere (one layer each), then the
// final norm.
func denseOrSparse(hidden, vocab int64, at, dense, moe core.Layer, sparse []bool) []core.Layer {
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	denseBlock := seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), dense))
	sparseBlock := seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), moe))
	blocks := make([]core.Layer, len(sparse))
	for i := range blocks {
		blocks[i] = denseBlock
		if sparse[i] {
			blocks[i] = sparseBlock
		}
	}
	return []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
}
