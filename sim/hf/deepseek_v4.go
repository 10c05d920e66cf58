package hf

import (
	"encoding/json"
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildDeepSeekV4 builds transformers' DeepseekV4ForCausalLM (model_type
// deepseek_v4: DeepSeek-V4-Flash and DeepSeek-V4-Pro;
// models/deepseek_v4/modeling_deepseek_v4.py at 5.25.0): the residual is
// hc_mult streams (nn.HyperExpand, then every decoder layer's attention
// and MoE each wrapped in a manifold-constrained hyper-connection,
// nn.HyperConnection, attn_hc and ffn_hc; nn.HyperHead collapses them
// before the final norm). Each layer's attention (nn.V4Attention: a
// low-rank query, one shared key-value head, sinks, a grouped output
// projection, eager only) is by layer_types a sliding one, compressed
// sparse (CSA: an overlapping compressor of rate
// compress_rates["compressed_sparse_attention"] and a lightning indexer)
// or heavily compressed (HCA: one entry per
// compress_rates["heavily_compressed_attention"] tokens); each layer's MLP
// is an MoE of n_routed_experts clamped SwiGLU experts (swiglu_limit)
// with sqrt-softplus scoring, hash-routed (a frozen tid2eid table) on the
// mlp_layer_types "hash_moe" layers, top-k elsewhere, beside
// n_shared_experts shared experts. The checkpoints' legacy keys are read
// as DeepseekV4Config.__post_init__ reads them: compress_ratios (0, 4 or
// 128 per layer, the MTP layer's trailing), num_hash_layers,
// qk_rope_head_dim, compress_rate_csa and compress_rate_hca.
//
// The MTP layer the checkpoints hold (mtp.0) is not built by transformers
// (_keys_to_ignore_on_load_unexpected) and not modelled.
func buildDeepSeekV4(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	headDim := c.sizeOr("head_dim", 512)
	if kv := c.sizeOr("num_key_value_heads", 1); kv != 1 && c.err == nil {
		c.fail("num_key_value_heads", "must be 1 for model_type deepseek_v4 (one shared key-value head; got %d)", kv)
	}
	rope := c.v4RopeDim(headDim)
	qLora := c.sizeOr("q_lora_rank", 1024)
	groups := c.sizeOr("o_groups", 8)
	oRank := c.sizeOr("o_lora_rank", 1024)
	window := c.sizeOr("sliding_window", 128)
	streams := c.sizeOr("hc_mult", 4)
	iters := c.sizeOr("hc_sinkhorn_iters", 20)
	experts := c.sizeOr("n_routed_experts", 256)
	topK := c.sizeOr("num_experts_per_tok", 6)
	inter := c.sizeOr("moe_intermediate_size", 2048)
	shared := c.intOr("n_shared_experts", 1)
	limit := c.number("swiglu_limit", 10)
	tie := c.flag("tie_word_embeddings", false)
	c.mlpAct("hidden_act", "silu", true)
	c.object("rope_scaling")
	if p := c.prob("attention_dropout", 0); p > 0 {
		c.fail("attention_dropout", "must be 0 for model_type deepseek_v4: the dropout of its eager attention is not modelled (got %g)", p)
	}
	if f := c.str("scoring_func", "sqrtsoftplus"); f != "sqrtsoftplus" && c.err == nil {
		c.fail("scoring_func", "must be \"sqrtsoftplus\" for model_type deepseek_v4 (got %q): the other scores are not modelled", f)
	}
	if nextn := c.intOr("num_nextn_predict_layers", 1); c.mtp && nextn > 0 && c.err == nil {
		c.fail("num_nextn_predict_layers", "is %d, but mtp=True is not modelled for model_type deepseek_v4: its MTP layer (mtp.0, with its own hyper-connection head and e_proj/h_proj) is one transformers does not build", nextn)
	}
	if (heads*headDim)%max(groups, 1) != 0 && c.err == nil {
		c.fail("o_groups", "(%d) must divide num_attention_heads x head_dim (%d x %d)", groups, heads, headDim)
	}
	kinds := c.v4LayerTypes(layers)
	rates := c.v4CompressRates()
	hash := c.v4HashLayers(layers)
	ix := &nn.V4Indexer{Heads: c.sizeOr("index_n_heads", 64), HeadDim: c.sizeOr("index_head_dim", 128), TopK: c.sizeOr("index_topk", 512)}
	if ix.HeadDim < rope && c.err == nil {
		c.fail("index_head_dim", "(%d) is less than the rope dim %d (the indexer rotates the last qk_rope_head_dim of each head)", ix.HeadDim, rope)
	}
	attnEstimate := float64(hidden)*float64(qLora+2*headDim) + float64(qLora+oRank)*float64(heads*headDim) + float64(groups*oRank)*float64(hidden)
	moeEstimate := float64(experts+shared)*3*float64(hidden)*float64(inter) + float64(streams*streams*(streams+2))*2*float64(hidden)
	c.checkTotal(float64(layers)*(attnEstimate+moeEstimate) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	attns := map[string]*nn.V4Attention{}
	attnFor := func(kind string) *nn.V4Attention {
		if a, ok := attns[kind]; ok {
			return a
		}
		a := &nn.V4Attention{Name: "self_attn", Dim: hidden, Heads: heads, HeadDim: headDim, RopeDim: rope, QLoraRank: qLora,
			OGroups: groups, OLoraRank: oRank, Window: window}
		switch kind {
		case v4CSA:
			a.Compressor = &nn.KVCompressor{Rate: rates[v4CSA], HeadDim: headDim, Overlap: true, Indexer: ix}
		case v4HCA:
			a.Compressor = &nn.KVCompressor{Rate: rates[v4HCA], HeadDim: headDim}
		}
		attns[kind] = a
		return a
	}
	moeFor := map[bool]*nn.MoE{}
	for _, h := range []bool{false, true} {
		m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: "swiglu",
			Router: nn.RouterSqrtSoftplus, NormTopK: true, ScoreBias: !h, SharedExperts: shared, SharedHidden: inter, SwiGLULimit: limit}
		if h {
			m.HashVocab = vocab
		}
		moeFor[h] = m
	}
	c.checkLayer(moeFor[false], moeKeys("n_routed_experts", "num_experts_per_tok"))
	if c.err != nil {
		return nil
	}
	type blockKey struct {
		kind string
		hash bool
	}
	made := map[blockKey]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := blockKey{kinds[i], hash[i]}
		if _, ok := made[k]; !ok {
			made[k] = seq(
				&nn.HyperConnection{Module: "attn_hc", Dim: hidden, Streams: streams, SinkhornIters: iters,
					Inner: seq(&nn.KeptNorm{Name: "input_layernorm", Dim: hidden}, attnFor(k.kind))},
				&nn.HyperConnection{Module: "ffn_hc", Dim: hidden, Streams: streams, SinkhornIters: iters,
					Inner: seq(&nn.KeptNorm{Name: "post_attention_layernorm", Dim: hidden}, moeFor[k.hash])})
		}
		blocks[i] = made[k]
	}
	ls := []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&nn.HyperExpand{Dim: hidden, Streams: streams},
		stackBlocks("layers", blocks),
		&nn.HyperHead{Name: "hc_head", Dim: hidden, Streams: streams},
		&nn.KeptNorm{Name: "norm", Dim: hidden},
	}
	return c.finish(head, ls, vocab, tie)
}

// DeepSeek-V4's attention kinds (DEEPSEEK_V4_LAYER_TYPES).
const (
	v4Sliding = "sliding_attention"
	v4CSA     = "compressed_sparse_attention"
	v4HCA     = "heavily_compressed_attention"
)

// v4RopeDim is the rotated width of a head: qk_rope_head_dim (legacy) or
// head_dim x partial_rotary_factor, 64/512 of it by default.
func (c *hfConfig) v4RopeDim(headDim int64) int64 {
	if c.has("qk_rope_head_dim") {
		return c.size("qk_rope_head_dim")
	}
	f := c.number("partial_rotary_factor", 64.0/512.0)
	d := int64(float64(headDim) * f)
	if (d <= 0 || d > headDim || d%2 != 0) && c.err == nil {
		c.fail("partial_rotary_factor", "makes a rope dim of %d of the %d-wide head: it must be even and positive", d, headDim)
	}
	return d
}

// v4LayerTypes reads each layer's attention kind: layer_types, else the
// legacy compress_ratios (0 sliding, 4 CSA, 128 HCA; entries past the
// layers, the MTP layer's, ignored), else DeepseekV4Config's default (two
// HCA layers, then CSA and HCA alternating).
func (c *hfConfig) v4LayerTypes(layers int64) []string {
	out := make([]string, layers)
	for i := range out {
		out[i] = v4CSA
		if i < 2 || (i-2)%2 == 0 {
			out[i] = v4HCA
		}
	}
	key := "layer_types"
	var list []any
	switch {
	case c.raw["layer_types"] != nil:
		list, _ = c.raw["layer_types"].([]any)
	case c.raw["compress_ratios"] != nil:
		key = "compress_ratios"
		list, _ = c.raw["compress_ratios"].([]any)
	default:
		return out
	}
	if int64(len(list)) < layers {
		c.fail(key, "must list every one of the %d layers (got %s)", layers, describeJSON(c.raw[key]))
		return out
	}
	byRatio := map[string]string{"0": v4Sliding, "4": v4CSA, "128": v4HCA}
	for i := range out {
		v := list[i]
		if key == "compress_ratios" {
			n, _ := v.(json.Number)
			t, ok := byRatio[n.String()]
			if !ok {
				c.fail(key, "layer %d is %s: each must be 0 (sliding), 4 (compressed sparse) or 128 (heavily compressed)", i, describeJSON(v))
				return out
			}
			out[i] = t
			continue
		}
		s, _ := v.(string)
		if s != v4Sliding && s != v4CSA && s != v4HCA {
			c.fail(key, "layer %d is %s: each must be %q, %q or %q", i, describeJSON(v), v4Sliding, v4CSA, v4HCA)
			return out
		}
		out[i] = s
	}
	return out
}

// v4CompressRates reads compress_rates (an object by attention kind) and
// the legacy compress_rate_csa and compress_rate_hca; 4 and 128 by
// default.
func (c *hfConfig) v4CompressRates() map[string]int64 {
	rates := map[string]int64{v4CSA: 4, v4HCA: 128}
	if raw, ok := c.raw["compress_rates"].(map[string]any); ok {
		for k, v := range raw {
			if _, known := rates[k]; !known {
				c.fail("compress_rates", "names %q: its keys are %q and %q", k, v4CSA, v4HCA)
				return rates
			}
			n, _ := v.(json.Number)
			r, err := n.Int64()
			if err != nil || r <= 0 {
				c.fail("compress_rates", "%s must be a positive integer (got %s)", k, describeJSON(v))
				return rates
			}
			rates[k] = r
		}
	} else if c.raw["compress_rates"] != nil {
		c.fail("compress_rates", "must be an object of rates by attention kind (got %s)", describeJSON(c.raw["compress_rates"]))
	}
	rates[v4CSA] = c.sizeOr("compress_rate_csa", rates[v4CSA])
	rates[v4HCA] = c.sizeOr("compress_rate_hca", rates[v4HCA])
	return rates
}

// v4HashLayers reads which layers route by hash: mlp_layer_types
// ("hash_moe" or "moe" per layer), else the first num_hash_layers
// (default 3).
func (c *hfConfig) v4HashLayers(layers int64) []bool {
	out := make([]bool, layers)
	if raw := c.raw["mlp_layer_types"]; raw != nil {
		list, ok := raw.([]any)
		if !ok || int64(len(list)) < layers {
			c.fail("mlp_layer_types", "must list \"hash_moe\" or \"moe\" for each of the %d layers", layers)
			return out
		}
		for i := range out {
			s, _ := list[i].(string)
			if s != "hash_moe" && s != "moe" {
				c.fail("mlp_layer_types", "%s", fmt.Sprintf("layer %d is %s: each must be \"hash_moe\" or \"moe\"", i, describeJSON(list[i])))
				return out
			}
			out[i] = s == "hash_moe"
		}
		return out
	}
	n := c.intOr("num_hash_layers", 3)
	for i := range out {
		out[i] = int64(i) < n
	}
	return out
}
