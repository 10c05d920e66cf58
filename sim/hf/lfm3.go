package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildLFM3 builds transformers' Lfm3ForCausalLM (model_type lfm3:
// LiquidAI/LFM3-1.7B; models/lfm3/modular_lfm3.py at 5.25.0). It is
// LFM2's model (embed_tokens, layers, embedding_norm, the head tied by
// default) with layers of
//
//	x + post_operator_norm(mixer(operator_norm(x)))
//	x + post_ffn_norm(feed_forward(ffn_norm(x)))
//
// (the two post norms are nn.Identity under use_sandwich_norm false),
// every norm Lfm2RMSNorm (Llama's). The mixer is what layer_types names
// (Lfm3Config's default: full_attention where i % 4 == 2,
// sliding_attention where i % 4 == 0 and i > 0, conv elsewhere):
//
//   - conv: LFM2's gated short convolution (nn.ShortConv, conv_L_cache 7
//     by default), unchanged;
//   - sliding_attention and full_attention: Qwen3's attention (q_norm and
//     k_norm per head, o_proj; every projection biased by
//     attention_bias; head_dim 128 by default) whose rope is OLMo's
//     apply_rotary_pos_emb over the fp32 tables Lfm3RotaryEmbedding makes
//     once a forward for each layer type (its forward does not cast them
//     to x's dtype): q and k rotate in fp32 and are cast back. Every
//     table is head_dim wide: the full layers' "proportional" rope
//     (partial_rotary_factor 0.5) zeroes the frequencies of the dims it
//     passes instead of narrowing the table. The sliding layers attend to
//     the last sliding_window (256) keys. Under use_attention_gate (the
//     default) the output is multiplied by sigmoid(g_proj(x)), one gate a
//     head (nn.Attention.GateSigmoid);
//
// and the feed-forward LFM2-MoE's dense SwiGLU (w1, w3, w2) of
// intermediate_size as is (Lfm2MoeMLP: no block_auto_adjust_ff_dim).
// Lfm3Config drops LFM2's legacy keys (block_ff_dim, block_* and
// full_attn_idxs are no attributes of it, tie_embedding is not popped):
// they are read as transformers reads them, not at all.
func buildLFM3(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("hidden_size", 2048) // Lfm3Config's defaults
	layers := c.sizeOr("num_hidden_layers", 24)
	vocab := c.sizeOr("vocab_size", 128000)
	heads := c.sizeOr("num_attention_heads", 16)
	kv := c.sizeOr("num_key_value_heads", 4)
	if c.err == nil && heads%kv != 0 {
		c.fail("num_key_value_heads", "(%d) must divide the %d attention heads", kv, heads)
	}
	if c.null("head_dim") {
		c.fail("head_dim", "must be an integer (got null): Lfm3Config's head_dim is an int (128 by default)")
	}
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	inter := c.sizeOr("intermediate_size", 7680)
	tie := c.flag("tie_word_embeddings", true)
	bias := c.flag("attention_bias", false)
	pa := c.prob("attention_dropout", 0)
	sandwich := c.flag("use_sandwich_norm", true)
	gate := c.flag("use_attention_gate", true)
	kinds := c.lfm3LayerTypes(layers)
	window := int64(0)
	if kinds[lfm3Sliding] != nil {
		if c.null("sliding_window") {
			c.fail("sliding_window", "must be a window size for the sliding_attention layers (got null)")
		}
		window = c.sizeOr("sliding_window", 256)
	}
	var used []string
	for _, k := range []lfm3Kind{lfm3Full, lfm3Sliding} {
		if kinds[k] != nil {
			used = append(used, string(k))
		}
	}
	c.ropePerType("Lfm3RotaryEmbedding", used, "default", "proportional")
	if c.err != nil {
		return nil
	}
	full := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true, QKNorm: true, EagerMask: true,
		RopeTables: "rotary_emb.full_attention", RopeTablesDType: units.FP32,
		GateSigmoid: gate, GatePerHead: true, Dropout: pa, ProbsDropoutOnly: pa > 0}
	sliding := *full
	sliding.Window, sliding.RopeTables = window, "rotary_emb.sliding_attention"
	conv := &nn.ShortConv{Name: "conv", Dim: hidden, ConvK: c.sizeOr("conv_L_cache", 7), Bias: c.flag("conv_bias", false)}
	mlp := &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: inter, Act: "swiglu", GateName: "w1", InName: "w3", OutName: "w2"}
	c.checkTotal(float64(layers)*(math.Max(float64(conv.Params()), float64(full.Params()))+3*float64(hidden)*float64(inter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	sub := func(pre, post string, l core.Layer) core.Layer {
		if sandwich {
			return res(norm(pre), l, norm(post))
		}
		return res(norm(pre), l)
	}
	mixers := map[lfm3Kind]core.Layer{lfm3Conv: conv, lfm3Sliding: &sliding, lfm3Full: full}
	made := map[lfm3Kind]core.Layer{}
	blocks := make([]core.Layer, layers)
	for k, at := range kinds {
		if made[k] == nil {
			made[k] = seq(sub("operator_norm", "post_operator_norm", mixers[k]), sub("ffn_norm", "post_ffn_norm", mlp))
		}
		for _, i := range at {
			blocks[i] = made[k]
		}
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		norm("embedding_norm")}
	return c.finish(head, ls, vocab, tie)
}

// lfm3Kind is an LFM3 layer's mixer, as layer_types names it.
type lfm3Kind string

const (
	lfm3Conv    lfm3Kind = "conv"
	lfm3Sliding lfm3Kind = "sliding_attention"
	lfm3Full    lfm3Kind = "full_attention"
)

// lfm3LayerTypes lists the layers of each kind: layer_types, else
// Lfm3Config.__post_init__'s pattern. Another name is refused:
// Lfm3Model.forward makes a mask for these three alone (a KeyError on
// any other in transformers 5.25.0).
func (c *hfConfig) lfm3LayerTypes(layers int64) map[lfm3Kind][]int64 {
	out := map[lfm3Kind][]int64{}
	if !c.has("layer_types") {
		for i := range max(layers, 0) {
			k := lfm3Conv
			switch {
			case i%4 == 2:
				k = lfm3Full
			case i%4 == 0 && i > 0:
				k = lfm3Sliding
			}
			out[k] = append(out[k], i)
		}
		return out
	}
	list, ok := c.raw["layer_types"].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("layer_types", "must list one layer type per layer (%d)", layers)
		return map[lfm3Kind][]int64{}
	}
	for i, v := range list {
		k := lfm3Kind(describeJSON(v))
		if s, ok := v.(string); ok {
			k = lfm3Kind(s)
		}
		switch k {
		case lfm3Conv, lfm3Sliding, lfm3Full:
			out[k] = append(out[k], int64(i))
		default:
			c.fail("layer_types", "names a layer type Lfm3Model does not make (got %s; known: conv, sliding_attention, full_attention)", describeJSON(v))
			return map[lfm3Kind][]int64{}
		}
	}
	return out
}
