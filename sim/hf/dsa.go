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

// mlpLayerTypes checks DeepseekV32Config's mlp_layer_types, which replaces
// first_k_dense_replace's pattern when given: only that pattern
// (first_k_dense_replace "dense" layers, then "sparse") is modelled.
func (c *hfConfig) mlpLayerTypes() {
	raw, ok := c.raw["mlp_layer_types"]
	if !ok || raw == nil || c.err != nil {
		return
	}
	list, ok := raw.([]any)
	layers := c.size("num_hidden_layers")
	dense := c.intOr("first_k_dense_replace", 0) // as buildRouted reads it
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
