package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildOlmo2 builds transformers' Olmo2ForCausalLM (model_type olmo2:
// OLMo 2 1B, 7B, 13B and 32B; models/olmo2/modeling_olmo2.py, first in the
// 4.47.0 wheel). Its decoder layer norms the sublayers' outputs, not their
// inputs:
//
//	h = x + post_attention_layernorm(self_attn(x))
//	y = h + post_feedforward_layernorm(mlp(h))
//
// and the attention norms q_proj's and k_proj's whole outputs (q_norm of
// num_attention_heads x head_dim, k_norm of num_key_value_heads x
// head_dim) before splitting the heads and rotating them
// (nn.Attention.QKNormWide). Every norm is Olmo2RMSNorm (nn.Olmo2Norm:
// the weight applied in fp32 before the cast back). The head is untied
// (tie_word_embeddings, default false).
//
// OLMo 3 (model_type olmo3: Olmo-3-1025-7B, Olmo-3-1125-32B and their
// Instruct and Think models; models/olmo3/modeling_olmo3.py) is the same
// layer with sliding windows (olmo3.go).
func buildOlmo2(c *hfConfig, attn string, head hfHead) *core.Model {
	return c.olmo2Stack(attn, head, func(hidden, inter int64, act string) (core.Layer, float64) {
		return &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}, 3 * float64(hidden) * float64(inter)
	})
}

// olmo2Stack is OLMo 2's model with ff the feed-forward block of every
// layer (OLMo 2's MLP; FlexOlmo's MoE, flex_olmo.go) and its parameter
// estimate, from hidden_size, intermediate_size and hidden_act.
func (c *hfConfig) olmo2Stack(attn string, head hfHead, ff func(hidden, inter int64, act string) (core.Layer, float64)) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	c.object("rope_scaling")
	c.number("rope_theta", 10000) // Olmo3Config's default 500000: no size depends on it
	tie := c.flag("tie_word_embeddings", false)
	bias := c.flag("attention_bias", false)
	act := c.mlpAct("hidden_act", "silu", true)
	drop, after := c.attnDropout("attention_dropout", c.prob("attention_dropout", 0), 0, "dropout")
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Dropout: drop, Rope: true, SoftmaxFP32: true, QKNormWide: true,
		RopeTables: "rotary_emb", RopeTablesDType: units.FP32, EagerMask: true}
	mlp, estimate := ff(hidden, inter, act)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Olmo2Norm{Name: name, Dim: hidden} }
	block := func(at *nn.Attention) core.Layer {
		attnPart := append(append([]core.Layer{at}, after...), norm("post_attention_layernorm"))
		return seq(res(attnPart...), res(mlp, norm("post_feedforward_layernorm")))
	}
	blocks := c.olmoBlocks(at, layers, block)
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+estimate) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}
