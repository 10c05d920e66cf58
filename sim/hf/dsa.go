package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildDeepSeekV32 builds transformers' DeepseekV32ForCausalLM (model_type
// deepseek_v32: DeepSeek-V3.2-Exp and DeepSeek-V3.2; modular_deepseek_v32.py,
// first in the 5.11.0 wheel): DeepSeek-V3's decoder (buildRouted: MLA,
// first_k_dense_replace dense layers, then DeepseekV3-style MoE layers)
// with DeepSeek Sparse Attention's lightning indexer in every attention
// layer (nn.DSAIndexer: wq_b, wk, k_norm, weights_proj; index_n_heads,
// index_head_dim and index_topk, DeepseekV32Config's defaults 64, 128 and
// 2,048). The indexer runs under torch.no_grad(): its weights are counted
// but get no gradient and no optimizer state, and its fp32 scores are a
// transient [seq, index heads, seq] tensor a layer. transformers runs the
// model with SDPA only (no flash path) and masks the dense attention.
//
// mtp=True adds the checkpoint's MTP layer (model.layers.61, with its own
// indexer), which transformers does not build, as for DeepSeek-V3.
func buildDeepSeekV32(c *hfConfig, attn string, head hfHead) *core.Model {
	at, estimate := deepSeekMLA(c, attn)
	at.Indexer = dsaIndexer(c)
	c.checkLayer(at, mlaKeys)
	c.mlpLayerTypes()
	if c.err != nil {
		return nil
	}
	return buildRouted(c, at, estimate, head)
}

// dsaIndexer reads the indexer's sizes, DeepseekV32Config's defaults where
// absent.
func dsaIndexer(c *hfConfig) *nn.DSAIndexer {
	return &nn.DSAIndexer{Heads: c.sizeOr("index_n_heads", 64), HeadDim: c.sizeOr("index_head_dim", 128),
		TopK: c.sizeOr("index_topk", 2048)}
}

// mlpLayerTypes checks the mlp_layer_types of DeepseekV32Config,
// GlmMoeDsaConfig and Glm4MoeLiteConfig, which replaces
// first_k_dense_replace's pattern when given: only that pattern
// (firstDense "dense" layers, then "sparse") is modelled.
func (c *hfConfig) mlpLayerTypes() {
	raw, ok := c.raw["mlp_layer_types"]
	if !ok || raw == nil || c.err != nil {
		return
	}
	list, ok := raw.([]any)
	layers := c.size("num_hidden_layers")
	dense := c.firstDense() // as buildRouted reads it
	if !ok || int64(len(list)) != layers {
		c.fail("mlp_layer_types", "must list \"dense\" or \"sparse\" for each of the %d layers", layers)
		return
	}
	for i, v := range list {
		want := "sparse"
		if int64(i) < dense {
			want = "dense"
		}
		if s, _ := v.(string); s != want {
			c.fail("mlp_layer_types", "%s", fmt.Sprintf("layer %d is %v: only first_k_dense_replace=%d dense layers, then sparse ones, are modelled", i, v, dense))
			return
		}
	}
}

// buildGlmMoeDsa builds transformers' GlmMoeDsaForCausalLM (model_type
// glm_moe_dsa: GLM-5; modular_glm_moe_dsa.py, first in the 5.2.0 wheel):
// DeepSeek-V3.2 with GlmMoeDsaConfig's defaults (index_n_heads 32) and an
// interleaved rotation in the indexer (the same bytes), whose layers may
// share top-k selections: indexer_types ("full" or "shared" per layer), or
// index_topk_pattern ("F"/"S"), or index_topk_freq and
// index_skip_topk_offset (layer i has its own indexer when max(i - offset
// + 1, 0) % freq == 0; the defaults, 1 and 2, give every layer one). A
// shared layer has no indexer weights and builds its mask from the
// previous full layer's top-k. mtp=True's MTP layer has an indexer of its
// own (SGLang's GLM-5 resolver: the nextn layer always owns one).
func buildGlmMoeDsa(c *hfConfig, attn string, head hfHead) *core.Model {
	at, estimate := deepSeekMLA(c, attn)
	layers := c.size("num_hidden_layers")
	ix := nn.DSAIndexer{Heads: c.sizeOr("index_n_heads", 32), HeadDim: c.sizeOr("index_head_dim", 128),
		TopK: c.sizeOr("index_topk", 2048)}
	shared := c.indexerTypes(layers)
	c.mlpLayerTypes()
	if c.err != nil {
		return nil
	}
	full, reuse := *at, *at
	fullIx, sharedIx := ix, ix
	sharedIx.Shared = true
	full.Indexer, reuse.Indexer = &fullIx, &sharedIx
	c.checkLayer(&full, mlaKeys)
	if c.err != nil {
		return nil
	}
	return buildRoutedAt(c, func(i int64) core.Layer {
		if i < layers && shared[i] {
			return &reuse
		}
		return &full
	}, estimate, head)
}

// indexerTypes reads which of GLM-5's layers reuse an earlier layer's
// top-k (GlmMoeDsaConfig.__post_init__).
func (c *hfConfig) indexerTypes(layers int64) []bool {
	shared := make([]bool, layers)
	if c.err != nil {
		return shared
	}
	var names []string
	key := "indexer_types"
	switch {
	case c.raw["indexer_types"] != nil:
		list, ok := c.raw["indexer_types"].([]any)
		if !ok {
			c.fail(key, "must be a list of \"full\" or \"shared\", one per layer")
			return shared
		}
		for _, v := range list {
			s, ok := v.(string)
			if !ok {
				s = fmt.Sprint(v) // named as it is in the error below
			}
			names = append(names, s)
		}
	case c.raw["index_topk_pattern"] != nil:
		key = "index_topk_pattern"
		p, ok := c.raw[key].(string)
		if !ok {
			c.fail(key, "must be a string of F (full) and S (shared), one per layer")
			return shared
		}
		for _, r := range p {
			n, ok := map[rune]string{'F': "full", 'S': "shared"}[r]
			if !ok {
				n = string(r) // named as it is in the error below
			}
			names = append(names, n)
		}
	default:
		freq := max(c.intOr("index_topk_freq", 1), 1)
		offset := c.intOr("index_skip_topk_offset", 2)
		for i := range shared {
			shared[i] = max(int64(i)-offset+1, 0)%freq != 0
		}
		if layers > 0 && shared[0] {
			c.fail("index_skip_topk_offset", "layer 0 would reuse the top-k of no earlier layer")
		}
		return shared
	}
	if int64(len(names)) != layers {
		c.fail(key, "names %d layers, the model has %d", len(names), layers)
		return shared
	}
	for i, n := range names {
		switch {
		case n != "full" && n != "shared":
			c.fail(key, "layer %d is %q: each must be \"full\" or \"shared\" (F or S)", i, n)
		case i == 0 && n == "shared":
			c.fail(key, "layer 0 is shared: it has no earlier layer's top-k to reuse")
		}
		shared[i] = n == "shared"
	}
	return shared
}
