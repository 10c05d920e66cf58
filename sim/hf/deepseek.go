package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildDeepSeek builds transformers' DeepseekV3ForCausalLM (model_type
// deepseek_v3; DeepSeek-V3, R1, Moonlight, Kimi K2 share it) and
// Glm4MoeLiteForCausalLM (glm4_moe_lite, GLM-4.7-Flash: modular_glm4_moe_lite.py
// at 5.17.0 takes DeepseekV3Attention and GLM-4.5's experts and router,
// which are DeepSeek-V3's): multi-head
// latent attention (nn.MLA), first_k_dense_replace dense layers, then MoE
// layers of n_routed_experts fine-grained
// experts with sigmoid routing and the auxiliary-loss-free correction
// bias (a buffer, whatever topk_method says) beside n_shared_experts
// always-on experts, looped over as transformers 4.x does (DeepseekV3MoE.moe).
//
// Multi-token prediction: the checkpoint holds num_nextn_predict_layers
// MTP modules (DeepSeek-V3's model.layers.61: 11.5 B of the 685 B the
// model card counts, with copies of the embedding and the head), which
// transformers does not build; mtp adds them as DeepSeek and Megatron
// train them (nn.MTP: embedding and head shared with the main model).
func buildDeepSeek(c *hfConfig, attn string, head hfHead) *core.Model {
	at, estimate := deepSeekMLA(c, attn)
	if c.modelType == "glm4_moe_lite" {
		c.mlpLayerTypes()
	}
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, estimate, head)
}

// deepSeekMLA is DeepseekV3Attention's nn.MLA, with the estimate of its
// parameters the size check reads.
func deepSeekMLA(c *hfConfig, attn string) (*nn.MLA, float64) {
	hidden := c.size("hidden_size")
	heads := c.size("num_attention_heads")
	qLora := c.sizeOr("q_lora_rank", 0)
	kvLora := c.size("kv_lora_rank")
	nope := c.size("qk_nope_head_dim")
	ropeDim := c.size("qk_rope_head_dim")
	var vDim int64
	if c.modelType == "minicpm3" && !c.has("v_head_dim") && heads > 0 {
		vDim = hidden / heads // MiniCPM3Config's None (absent or null)
	} else {
		vDim = c.size("v_head_dim")
	}
	bias := c.flag("attention_bias", false)
	at := &nn.MLA{Name: "self_attn", Dim: hidden, Heads: heads, QLoraRank: qLora, KVLora: kvLora,
		Nope: nope, RopeDim: ropeDim, VDim: vDim, Bias: bias, Impl: attn, Causal: true,
		RopeTables: "rotary_emb", RopeComplex: c.modelType == "deepseek_v2"}
	c.checkLayer(at, mlaKeys)
	return at, 2 * float64(hidden) * float64(heads*(nope+ropeDim+vDim))
}

// buildRouted builds the decoder DeepSeek-V3's layout shares (DeepSeek-V3
// and GLM-4.5 alike, each with its own attention at): first_k_dense_replace
// dense layers, then MoE layers (moe_layer_freq must be 1) of
// n_routed_experts fine-grained experts with sigmoid routing and the
// auxiliary-loss-free correction bias (a buffer, whatever topk_method
// says) beside n_shared_experts always-on experts, looped over as transformers
// 4.x does (DeepseekV3MoE.moe, which Glm4MoeMoE subclasses), and the
// multi-token prediction modules mtp adds. A key config.json leaves out
// is its config class's default (configClasses: classKeys fills them in
// before the family builds). attnParams estimates the
// attention's parameters for the size check.
func buildRouted(c *hfConfig, at core.Layer, attnParams float64, head hfHead) *core.Model {
	return buildRoutedAt(c, func(int64) core.Layer { return at }, attnParams, head)
}

// buildRoutedAt is buildRouted with layer i's attention atFor(i) (GLM-5's
// layers with and without an indexer); atFor(num_hidden_layers) is the
// MTP layer's. Equal attentions make one block.
func buildRoutedAt(c *hfConfig, atFor func(i int64) core.Layer, attnParams float64, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	c.object("rope_scaling")
	c.prob("attention_dropout", 0)
	firstDense := min(c.firstDense(), layers)
	if f := c.intOr("moe_layer_freq", 1); c.err == nil && f != 1 {
		// the hub's remote code (modeling_deepseek.py) reads it
		if c.modelType == "axk1" || c.modelType == "axk2" { // their config classes' __post_init__ read the legacy key
			c.fail("moe_layer_freq", "must be 1 for model_type %s (got %d): dense layers between the MoE ones are not modelled", c.modelType, f)
		} else {
			c.fail("moe_layer_freq", "must be 1 for model_type %s (got %d): transformers builds an MoE block in every layer from first_k_dense_replace on and never reads it", c.modelType, f)
		}
	}
	nextn := c.intOr("num_nextn_predict_layers", 0)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	var denseFF, moeFF core.Layer
	type blockKey struct{ at, ff core.Layer }
	made := map[blockKey]core.Layer{}
	block := func(at, ff core.Layer) core.Layer {
		k := blockKey{at, ff}
		if b, ok := made[k]; ok {
			return b
		}
		inNorm, postNorm := norm("input_layernorm"), norm("post_attention_layernorm")
		if c.modelType == "axk2" { // AXK2DecoderLayer: gated norms, the second on MoE layers only
			rank := c.sizeOr("gated_norm_rank", 16)
			inNorm = &nn.GatedNorm{Name: "input_layernorm", Dim: hidden, Rank: rank}
			if ff == moeFF {
				postNorm = &nn.GatedNorm{Name: "post_attention_layernorm", Dim: hidden, Rank: rank}
			}
		}
		made[k] = seq(res(inNorm, at), res(postNorm, ff))
		return made[k]
	}
	estimate := 0.0
	if firstDense > 0 {
		inter := c.size("intermediate_size")
		denseFF = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
		estimate = 3 * float64(hidden) * float64(inter)
	}
	if firstDense < layers {
		experts := c.size("n_routed_experts")
		moeInter := c.size("moe_intermediate_size")
		moe := c.routedMoE(hidden, moeInter, experts, c.count("n_shared_experts"), act) // Dots1Config's default None: required
		c.checkLayer(moe, moeKeys("n_routed_experts", "num_experts_per_tok"))
		moeFF = moe
		estimate = float64(experts+moe.SharedExperts) * 3 * float64(hidden) * float64(moeInter)
	}
	c.checkTotal(float64(layers+nextn)*(attnParams+estimate) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	blocks := make([]core.Layer, layers)
	ff := denseFF
	for i := range blocks {
		ff = denseFF
		if int64(i) >= firstDense {
			ff = moeFF
		}
		blocks[i] = block(atFor(int64(i)), ff)
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks)}
	if c.mtp && head == headCausalLM {
		last := block(atFor(layers), ff) // the last layer's feed-forward
		for k := int64(0); k < nextn; k++ {
			ls = append(ls, &nn.MTP{Name: "mtp_" + core.Itoa(k), Dim: hidden, Vocab: vocab, Block: last})
		}
	}
	ls = append(ls, norm("norm"))
	return c.finish(head, ls, vocab, tie)
}

// routedMoE is the family's routed block: DeepSeek-V2's softmax router
// (deepSeekV2MoE), otherwise DeepseekV3TopkRouter's sigmoid scores with
// the correction bias, which transformers' router makes and adds whatever
// topk_method says (it never reads the key: modeling_deepseek_v3.py l. 130
// in 5.25.0, l. 121 in 4.57.1; Glm4MoeTopkRouter the same); only the hub's
// remote code makes it for "noaux_tc" alone (TestScoreBiasWhateverTopkMethod).
func (c *hfConfig) routedMoE(hidden, inter, experts, shared int64, act string) *nn.MoE {
	switch c.modelType {
	case "deepseek_v2":
		return c.deepSeekV2MoE(hidden, inter, experts, shared, act)
	case "mistral4":
		return c.mistral4MoE(hidden, inter, experts, shared, act)
	}
	if f := c.str("scoring_func", "sigmoid"); f != "sigmoid" {
		c.fail("scoring_func", "must be \"sigmoid\" for model_type %s (got %q)", c.modelType, f)
	}
	m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts,
		TopK: c.size("num_experts_per_tok"), Act: act, Router: nn.RouterSigmoid,
		NormTopK: c.flag("norm_topk_prob", true), ScoreBias: true,
		SharedExperts: shared, SharedHidden: inter}
	if c.modelType == "axk1" { // AXK1MoE's post_mlp_layernorm
		m.PostNorm = "post_mlp_layernorm"
	}
	return m
}

// firstDense is how many layers come before the first MoE layer:
// first_k_dense_replace (its class's default: configClasses), or none for
// solar_open, whose decoder layer is an MoE layer whatever its index
// (SolarOpenDecoderLayer, 5.25.0; its config class has no
// first_k_dense_replace), or one for glm4_moe_lite, whose config class
// has no first_k_dense_replace either: Glm4MoeLiteConfig's mlp_layer_types
// defaults to ["dense"] + ["sparse"] * (layers - 1), and transformers
// reads no first_k_dense_replace, so a file's other than 1 is refused
// (GLM-4.7-Flash's says 1).
func (c *hfConfig) firstDense() int64 {
	switch c.modelType {
	case "solar_open":
		return 0
	case "axk1", "axk2":
		return c.axk1FirstDense()
	case "glm4_moe_lite":
		if k := c.intOr("first_k_dense_replace", 1); c.err == nil && k != 1 {
			c.fail("first_k_dense_replace", "must be 1 for model_type glm4_moe_lite (got %d): Glm4MoeLiteConfig has no such key and builds layer 0 dense, the others MoE (mlp_layer_types)", k)
		}
		return 1
	}
	return c.intOr("first_k_dense_replace", 0)
}
