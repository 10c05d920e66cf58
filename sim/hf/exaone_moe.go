package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildExaoneMoe builds transformers' ExaoneMoeForCausalLM (model_type
// exaone_moe: LG's K-EXAONE-236B-A23B; models/exaone_moe, 5.25.0): EXAONE
// 4.0's attention (Exaone4Attention: q_norm and k_norm per head, sliding
// layers by layer_types or sliding_window_pattern, the global layers
// without rotary embedding; exaone4Attention) in OLMoE's pre-norm decoder
// layer (input_layernorm before the attention, post_attention_layernorm
// before the MLP), whose MLP is a dense one of intermediate_size or, where
// mlp_layer_types says "sparse" (default: from first_k_dense_replace,
// 1, on), DeepSeek-V3's MoE block: num_experts experts of
// moe_intermediate_size behind DeepseekV3TopkRouter's fp32 sigmoid with
// the correction bias, num_shared_experts (default 1) shared ones
// (routedMoE; ExaoneMoeConfig's defaults: configClasses). The router's weight and bias are kept fp32 as DeepSeek-V3's
// (_keep_in_fp32_modules_strict, gate.weight from 5.24). The MTP modules
// the checkpoint holds (mtp.*) are not built.
func buildExaoneMoe(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	full, local, sliding := c.exaone4Attention(attn, layers, hidden, heads, kv, hd)
	experts := c.size("num_experts")
	moe := c.routedMoE(hidden, c.size("moe_intermediate_size"), experts, c.count("num_shared_experts"), act)
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	sparse := c.sparseLayers(layers, c.intOr("first_k_dense_replace", 0))
	if c.err != nil {
		return nil
	}
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	type kind struct {
		slide, sparse bool
	}
	made := map[kind]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := kind{sliding[i], sparse[i]}
		if made[k] == nil {
			at, ff := full, core.Layer(dense)
			if k.slide {
				at = local
			}
			if k.sparse {
				ff = moe
			}
			made[k] = seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), ff))
		}
		blocks[i] = made[k]
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+float64(experts+moe.SharedExperts)*3*float64(hidden)*float64(moe.Hidden)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// sparseLayers lists the MoE layers: mlp_layer_types ("dense" or
// "sparse" for each layer), else every layer from firstDense on.
func (c *hfConfig) sparseLayers(layers, firstDense int64) []bool {
	out := make([]bool, max(layers, 0))
	raw, set := c.raw["mlp_layer_types"]
	if !set || raw == nil {
		for i := range out {
			out[i] = int64(i) >= firstDense
		}
		return out
	}
	list, ok := raw.([]any)
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
			c.fail("mlp_layer_types", "%s", fmt.Sprintf("layer %d is %s: each must be \"dense\" or \"sparse\"", i, describeJSON(v)))
			return out
		}
	}
	return out
}
