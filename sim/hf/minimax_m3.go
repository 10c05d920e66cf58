package hf

import (
	"encoding/json"
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMiniMaxM3Text builds transformers' MiniMaxM3VLForCausalLM (model_type
// minimax_m3_vl_text: MiniMax M3's text model; models/minimax_m3_vl/
// modular_minimax_m3_vl.py at 5.25.0). Its decoder layer is Mixtral's
// pre-norm one with Gemma's RMSNorm (fp32, weight + 1: input_layernorm,
// post_attention_layernorm, the final norm) around:
//
//   - MiniMaxM3VLAttention: q, k, v and o projections without biases,
//     num_attention_heads of head_dim over num_key_value_heads, q and k
//     normed per head by Gemma's RMSNorm before the rotary embedding,
//     which turns rope_parameters' partial_rotary_factor of each head
//     (the rest concatenated back; rotary_dim, which the checkpoints
//     write, is read by nothing in 5.25.0); on the layers layer_types
//     calls "minimax_m3_sparse" (else sparse_attention_config's
//     sparse_attention_freq) the lightning indexer (nn.M3Indexer) and its
//     block mask of every head, which SDPA keeps;
//   - the MLP, by mlp_layer_types (else moe_layer_freq; default every
//     layer "sparse"): MiniMaxM3VLDenseMLP of dense_intermediate_size (one
//     gate_up_proj, gpt-oss's clamped GLU of swiglu_limit and
//     swiglu_alpha, down_proj: nn.MLP.ClampedGLU) or
//     MiniMaxM3VLSparseMoeBlock: shared_experts (the same MLP of
//     shared_intermediate_size) first, then MiniMax-M2's router (gate, the
//     sigmoid of fp32 logits, top num_experts_per_tok of the scores plus
//     the e_score_correction_bias buffer, renormalised; fp32 weights) and
//     num_local_experts 3-D experts of intermediate_size with the clamped
//     GLU, times routed_scaling_factor, plus the shared output.
//
// hidden_act is never read (MiniMaxM3VLTextConfig sets it to silu; the
// checkpoints' "swigluoai" is the clamped GLU above). Flash attention is
// refused as transformers refuses it (_supports_flash_attn = False).
func buildMiniMaxM3Text(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("hidden_size", 6144)
	layers := c.sizeOr("num_hidden_layers", 60)
	heads := c.sizeOr("num_attention_heads", 64)
	kv := c.kvHeads("num_key_value_heads", heads)
	vocab := c.sizeOr("vocab_size", 200064)
	inter := c.sizeOr("intermediate_size", 3072)
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	tie := c.flag("tie_word_embeddings", false)
	pa := c.prob("attention_dropout", 0)
	c.number("swiglu_limit", 7)
	c.number("swiglu_alpha", 1.702)
	c.number("routed_scaling_factor", 2)
	sparse := c.m3AttentionTypes(layers)
	moeAt := c.m3MLPTypes(layers)
	width := ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 1))
	sc := c.m3SparseConfig()
	legacy := func(flat, old string, def int64) int64 {
		if sc == nil || sc.raw[old] == nil {
			return c.sizeOr(flat, def)
		}
		v := sc.sizeOr(old, def)
		if sc.err != nil && c.err == nil {
			c.err = sc.err
		}
		return v
	}
	ix := &nn.M3Indexer{Heads: legacy("index_n_heads", "sparse_num_index_heads", 4), HeadDim: legacy("index_head_dim", "sparse_index_dim", 128),
		Block: legacy("index_block_size", "sparse_block_size", 128), TopK: legacy("index_topk_blocks", "sparse_topk_blocks", 16),
		Local: c.intOr("index_local_blocks", 1)}
	if sc != nil && sc.raw["sparse_local_block"] != nil {
		ix.Local = sc.intOr("sparse_local_block", 1)
		if sc.err != nil && c.err == nil {
			c.err = sc.err
		}
	}
	if c.err != nil {
		return nil
	}
	full := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		QKNorm: true, QKNormGemma: true, Rope: true, SoftmaxFP32: true, RopeTables: "rotary_emb", RopeTablesDim: width, RopeCat: true,
		EagerMask: true, Dropout: pa, ProbsDropoutOnly: pa > 0}
	c.checkLayer(full, nil)
	withIndexer := *full
	withIndexer.M3Indexer = ix
	for _, s := range sparse {
		if s {
			c.checkLayer(&withIndexer, nil)
			break
		}
	}
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: c.sizeOr("num_local_experts", 128), TopK: c.sizeOr("num_experts_per_tok", 4),
		Act: "swiglu", Router: nn.RouterSigmoid, NormTopK: true, ScoreBias: true, ScoreBiasName: "e_score_correction_bias", SigmoidLogitsFP32: true,
		ClampedGLU: true, SharedExperts: 1, SharedHidden: c.sizeOr("shared_intermediate_size", 3072), SharedFirst: true, RoutedScale: true}
	c.checkLayer(moe, moeKeys("num_local_experts", "num_experts_per_tok"))
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: c.sizeOr("dense_intermediate_size", 12288), Act: "swiglu", FusedName: "gate_up_proj", ClampedGLU: true}
	c.checkLayer(dense, nil)
	estimate := 2 * float64(vocab) * float64(hidden)
	for i := range sparse {
		estimate += 2*float64(hidden)*float64((heads+kv)*hd) + 3*float64(hidden)*float64(max(dense.Hidden, moe.Experts*inter+moe.SharedHidden))
		if sparse[i] {
			estimate += float64(hidden) * float64((ix.Heads+1)*ix.HeadDim)
		}
	}
	c.checkTotal(estimate)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.GemmaNorm{Name: name, Dim: hidden} }
	type blockKey struct{ sparse, moe bool }
	made := map[blockKey]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := blockKey{sparse[i], moeAt[i]}
		if made[k] == nil {
			at, ff := core.Layer(full), core.Layer(dense)
			if k.sparse {
				at = &withIndexer
			}
			if k.moe {
				ff = moe
			}
			made[k] = seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), ff))
		}
		blocks[i] = made[k]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// m3SparseConfig is sparse_attention_config, the checkpoints' nested
// spelling of the indexer's keys, which MiniMaxM3VLTextConfig pops (its
// sparse_* keys win over the flat index_* ones); nil when absent.
func (c *hfConfig) m3SparseConfig() *hfConfig {
	raw, set := c.raw["sparse_attention_config"]
	if !set || raw == nil {
		return nil
	}
	if _, ok := raw.(map[string]any); !ok {
		c.fail("sparse_attention_config", "must be an object (got %s)", describeJSON(raw))
		return nil
	}
	return c.sub("sparse_attention_config")
}

// m3AttentionTypes reads which layers have the lightning indexer:
// layer_types ("minimax_m3_sparse" or "full_attention"), else
// sparse_attention_config's sparse_attention_freq (a truthy entry a
// sparse layer), else none (MiniMaxM3VLTextConfig.__post_init__).
func (c *hfConfig) m3AttentionTypes(layers int64) []bool {
	out := make([]bool, max(layers, 0))
	if c.err != nil {
		return out
	}
	if c.raw["layer_types"] != nil {
		return c.layerTypes(layers, "minimax_m3_sparse", "full_attention")
	}
	sc, _ := c.raw["sparse_attention_config"].(map[string]any)
	if sc == nil || sc["sparse_attention_freq"] == nil {
		return out
	}
	return c.truthyList(sc["sparse_attention_freq"], "sparse_attention_config.sparse_attention_freq", layers, out)
}

// m3MLPTypes reads which layers hold the MoE block: mlp_layer_types
// ("sparse" or "dense"), else moe_layer_freq (a truthy entry a sparse
// layer), else every layer.
func (c *hfConfig) m3MLPTypes(layers int64) []bool {
	out := make([]bool, max(layers, 0))
	if c.err != nil {
		return out
	}
	if c.raw["mlp_layer_types"] != nil {
		list, ok := c.raw["mlp_layer_types"].([]any)
		if !ok || int64(len(list)) != layers {
			c.fail("mlp_layer_types", "must list \"dense\" or \"sparse\" for each of the %d layers", layers)
			return out
		}
		for i, v := range list {
			switch v {
			case "sparse":
				out[i] = true
			case "dense":
			default:
				c.fail("mlp_layer_types", "layer %d is %s: each must be \"dense\" or \"sparse\"", i, describeJSON(v))
				return out
			}
		}
		return out
	}
	if c.raw["moe_layer_freq"] != nil {
		return c.truthyList(c.raw["moe_layer_freq"], "moe_layer_freq", layers, out)
	}
	for i := range out {
		out[i] = true
	}
	return out
}

// truthyList reads a list of one flag a layer (0 or 1, false or true) as
// Python's truth values.
func (c *hfConfig) truthyList(raw any, key string, layers int64, out []bool) []bool {
	list, ok := raw.([]any)
	if !ok || int64(len(list)) != layers {
		c.fail(key, "must list a 0 or 1 for each of the %d layers (got %s)", layers, describeJSON(raw))
		return out
	}
	for i, v := range list {
		switch v := v.(type) {
		case bool:
			out[i] = v
		case json.Number:
			f, err := v.Float64()
			if err != nil {
				c.fail(key, "layer %d is %s: each must be 0 or 1", i, v)
				return out
			}
			out[i] = f != 0
		default:
			c.fail(key, "%s", fmt.Sprintf("layer %d is %s: each must be 0 or 1", i, describeJSON(v)))
			return out
		}
	}
	return out
}
