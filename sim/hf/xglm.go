package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildXGLM follows transformers' XGLMForCausalLM (model_type xglm: Meta's
// XGLM 564M to 7.5B; models/xglm/modeling_xglm.py and
// configuration_xglm.py at 5.25.0): model.embed_tokens
// (XGLMScaledWordEmbedding: the lookup times sqrt(d_model) when
// scale_embedding, the product what the forward holds), plus
// embed_positions' sinusoidal table (nn.SinusoidalPositions: a buffer of
// max_position_embeddings + 2 rows, no parameters), dropout, then layers
// of pre-norm self_attn (q, k, v and out_proj biased) and fc1,
// activation_function (gelu), fc2, each sublayer's output dropped out
// (dropout) before its residual; the final layer_norm and lm_head tied to
// embed_tokens. XGLMAttention is its own eager attention (no SDPA nor
// flash path: attn="sdpa" runs eager, "flash" is refused;
// nn.Attention.XGLMEager): q scaled before the product, the masked scores
// floored by torch.max, which saves them. attention_dropout drops the
// probabilities.
//
// Refused: activation_dropout (a dropout after the activation, not
// modelled), layerdrop (layers skipped at random in training) and
// add_cross_attention (encoder_attn layers, which a causal LM without
// encoder_hidden_states never runs). XGLMConfig's defaults (xglm-564M's
// sizes) apply to the keys config.json leaves out; num_attention_heads,
// hidden_size and num_hidden_layers are its attribute_map names for
// attention_heads, d_model and num_layers (configClasses).
func buildXGLM(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("d_model", 1024)
	layers := c.sizeOr("num_layers", 24)
	heads := c.sizeOr("attention_heads", 16)
	vocab := c.sizeOr("vocab_size", 256008)
	positions := c.sizeOr("max_position_embeddings", 2048)
	ffn := c.sizeOr("ffn_dim", 4096)
	act := c.mlpAct("activation_function", "gelu", false)
	pa, po := c.prob("attention_dropout", 0.1), c.prob("dropout", 0.1)
	scale := c.flag("scale_embedding", true)
	tie := c.flag("tie_word_embeddings", true)
	if c.err == nil && c.prob("activation_dropout", 0) > 0 {
		c.fail("activation_dropout", "(%g) is not modelled: XGLMDecoderLayer drops fc1's activated output out, which memsh's MLP does not; set it to 0 (the published checkpoints' value)", c.prob("activation_dropout", 0))
	}
	if c.err == nil && c.prob("layerdrop", 0) > 0 {
		c.fail("layerdrop", "(%g) is not modelled: XGLMModel skips layers at random in training; set it to 0 (the published checkpoints' value)", c.prob("layerdrop", 0))
	}
	if c.err == nil && c.flag("add_cross_attention", false) {
		c.fail("add_cross_attention", "is true: XGLM's encoder_attn layers (cross-attention over encoder_hidden_states) are not modelled")
	}
	if c.err == nil && hidden%heads != 0 {
		c.fail("attention_heads", "must divide d_model (%d): XGLMAttention's head_dim is d_model // attention_heads, and transformers refuses a remainder (got %d)", hidden, heads)
	}
	drop, after := c.attnDropout("attention_dropout", pa, po, "") // XGLMDecoderLayer's functional dropout: no module
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(ffn)) + float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, HeadDim: hidden / heads, QKVBias: true, OutBias: true, OutName: "out_proj",
		Impl: attn, Causal: true, Dropout: drop, EagerMask: true, XGLMEager: true}
	mlp := &nn.MLP{Dim: hidden, Hidden: ffn, Act: act, Bias: true, Dropout: po, Inline: true} // XGLMDecoderLayer's own fc1, fc2
	block := seq(
		res(append([]core.Layer{&nn.Norm{Name: "self_attn_layer_norm", Dim: hidden, Bias: true}, at}, after...)...),
		res(&nn.Norm{Name: "final_layer_norm", Dim: hidden, Bias: true}, mlp),
	)
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}}
	if scale {
		ls = append(ls, &nn.Scale{Name: "embed_scale", Factor: math.Sqrt(float64(hidden)), In: "embed_tokens", Rebinds: true})
	}
	ls = append(ls, &nn.SinusoidalPositions{Name: "embed_positions", Rows: positions + 2, Dim: hidden, Offset: 2})
	if po > 0 {
		ls = append(ls, &nn.Dropout{P: po})
	}
	ls = append(ls, &core.Repeat{Name: "layers", Layer: block, N: layers}, &nn.Norm{Name: "layer_norm", Dim: hidden, Bias: true})
	return c.finish(head, ls, vocab, tie)
}
