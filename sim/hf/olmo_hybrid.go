package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildOlmoHybrid builds transformers' OlmoHybridForCausalLM (model_type
// olmo_hybrid: Ai2's Olmo-Hybrid-7B; models/olmo_hybrid/
// modeling_olmo_hybrid.py at 5.25.0, first in the 5.3.0 wheel). Two
// layer kinds, as layer_types names them (else OlmoHybridConfig's
// pattern: full_attention at every fourth layer, i % 4 == 3, and at the
// last when that leaves none):
//
//   - full_attention: OLMo 3's decoder layer without the sliding window
//     (OlmoHybridAttentionDecoderLayer: the norms after each sublayer, q_norm
//     and k_norm over the whole width, as buildOlmo2);
//   - linear_attention: a Llama layer (the norms before each sublayer)
//     whose mixer is a Gated DeltaNet, linear_attn (OlmoHybridGatedDeltaNet:
//     nn.GatedDeltaNet with SeparateProj, its q_proj, k_proj and v_proj
//     concatenated for conv1d, beta doubled when linear_allow_neg_eigval,
//     default true).
//
// The Gated DeltaNet's sizes default as OlmoHybridConfig.__post_init__
// says: linear_num_key_heads and linear_num_value_heads to
// num_attention_heads, linear_key_head_dim to int(0.75 * hidden_size /
// linear_num_key_heads), linear_value_head_dim to twice that. Every norm
// is OlmoHybridRMSNorm (Olmo2RMSNorm: nn.Olmo2Norm). A rope_theta of null
// turns the rotary embedding off (OlmoHybridModel.__init__: "Released
// ckpt don't use any ROPE"): the attention layers are then NoPE.
//
// Without flash-linear-attention and causal-conv1d installed transformers
// runs its torch fallbacks (torch_chunk_gated_delta_rule, F.conv1d:
// linear_attn="torch"); with them, fla's chunk_gated_delta_rule (the
// default, "fla"). The gated norm is OlmoHybridRMSNormGated in torch ops
// either way at 5.25.0.
func buildOlmoHybrid(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	tie := c.flag("tie_word_embeddings", false)
	bias := c.flag("attention_bias", false)
	act := c.mlpAct("hidden_act", "silu", true)
	drop, after := c.attnDropout("attention_dropout", c.prob("attention_dropout", 0), 0, "dropout")
	rope := c.olmoHybridRope()
	full := c.olmoHybridLayers(layers)
	kHeads := c.sizeOr("linear_num_key_heads", heads)
	vHeads := c.sizeOr("linear_num_value_heads", heads)
	kDim := c.sizeOr("linear_key_head_dim", int64(0.75*float64(hidden)/float64(max(kHeads, 1))))
	vDim := c.sizeOr("linear_value_head_dim", 2*kDim)
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Dropout: drop, Rope: rope, SoftmaxFP32: true, QKNormWide: true, EagerMask: true}
	if rope {
		at.RopeTables, at.RopeTablesDType = "rotary_emb", units.FP32
	}
	gdn := &nn.GatedDeltaNet{Name: "linear_attn", Dim: hidden, KHeads: kHeads, VHeads: vHeads, KHeadDim: kDim, VHeadDim: vDim,
		ConvK: c.sizeOr("linear_conv_kernel_dim", 4), Chunk: gdnChunk, SeparateProj: true,
		NegEigval: c.flag("linear_allow_neg_eigval", true)}
	c.checkLayer(gdn, gatedDeltaNetKeys)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Olmo2Norm{Name: name, Dim: hidden} }
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	attnPart := append(append([]core.Layer{at}, after...), norm("post_attention_layernorm"))
	attnBlock := seq(res(attnPart...), res(mlp, norm("post_feedforward_layernorm")))
	linearBlock := seq(res(norm("input_layernorm"), gdn), res(norm("post_attention_layernorm"), mlp))
	blocks := make([]core.Layer, len(full))
	for i, f := range full {
		blocks[i] = linearBlock
		if f {
			blocks[i] = attnBlock
		}
	}
	mixers := max(float64(gdn.Params()), 4*float64(hidden)*float64(heads*hd))
	c.checkTotal(float64(layers)*(mixers+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// olmoHybridRope says whether the attention layers rotate: unless
// rope_theta is null, in rope_parameters or (without them) at the top
// level, as the released configs set it. A rope_parameters of null or
// without rope_theta gets the default theta (PreTrainedConfig's
// standardisation at 5.25.0: OlmoHybridModel builds its rotary_emb).
func (c *hfConfig) olmoHybridRope() bool {
	from := c
	if rp, ok := c.raw["rope_parameters"].(map[string]any); ok {
		from = &hfConfig{raw: rp, modelType: c.modelType, prefix: c.at("rope_parameters.")}
	} else {
		c.object("rope_parameters")
	}
	theta, set := from.raw["rope_theta"]
	if set && theta == nil {
		return false
	}
	from.number("rope_theta", 10000)
	if from.err != nil && c.err == nil {
		c.err = from.err
	}
	return true
}

// olmoHybridLayers lists the full-attention layers: layer_types, else
// OlmoHybridConfig's pattern. OlmoHybridConfig.validate_architecture
// wants at least one layer of each kind.
func (c *hfConfig) olmoHybridLayers(layers int64) []bool {
	var full []bool
	if c.has("layer_types") {
		full = c.layerTypes(layers, "full_attention", "linear_attention")
	} else {
		full = make([]bool, max(layers, 0))
		for i := range full {
			full[i] = i%4 == 3
		}
		if len(full) > 0 && len(full) < 4 { // no i % 4 == 3: the last layer
			full[len(full)-1] = true
		}
	}
	if c.err != nil || len(full) == 0 {
		return full
	}
	n := 0
	for _, f := range full {
		if f {
			n++
		}
	}
	switch {
	case n == 0:
		c.fail("layer_types", "must name at least one full_attention layer (OlmoHybridConfig refuses a model without one)")
	case n == len(full):
		c.fail("layer_types", "must name at least one linear_attention layer (OlmoHybridConfig refuses a model without one)")
	}
	return full
}
