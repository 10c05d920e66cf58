package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMLALlama builds the decoders that are Llama's model and pre-norm
// layer (input_layernorm, the attention, post_attention_layernorm, a
// SwiGLU mlp of intermediate_size; norm, lm_head tied unless
// tie_word_embeddings says false) around DeepSeek's multi-head latent
// attention (deepSeekMLA's nn.MLA): MiniCPM3 (minicpm3.go: with its three
// scalings and mlp_bias) and Youtu (youtu.go). attention_dropout above 0
// is refused (nn.MLA drops nothing), eager attention too (noEager).
func buildMLALlama(c *hfConfig, attn string, head hfHead) *core.Model {
	mc := c.modelType == "minicpm3"
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	if mc && heads > 0 && hidden%heads != 0 && c.err == nil {
		// MiniCPM3Config.validate_architecture, whatever v_head_dim says
		c.fail("hidden_size", "(%d) is not a multiple of num_attention_heads (%d): MiniCPM3Config refuses it (validate_architecture)", hidden, heads)
	}
	at, estimate := deepSeekMLA(c, attn)
	if pa := c.prob("attention_dropout", 0); pa > 0 && c.err == nil {
		c.fail("attention_dropout", "is not modelled for model_type %s (got %g): memsh's latent attention drops nothing; set 0", c.modelType, pa)
	}
	c.object("rope_scaling")
	c.object("rope_parameters")
	tie := c.flag("tie_word_embeddings", true)
	act := c.mlpAct("hidden_act", "silu", true)
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	var embScale, depth, base float64
	if mc { // YoutuMLP (Qwen3MLP) is never biased
		mlp.Bias = c.flag("mlp_bias", false)
		embScale = c.minicpm3Factor("scale_emb", 12, 0)
		depth = c.minicpm3Factor("scale_depth", 1.4, math.Sqrt(float64(layers)))
		base = c.minicpm3Factor("dim_model_base", 256, float64(hidden))
	}
	c.checkLayer(mlp, map[nn.Field]string{nn.FieldHidden: "intermediate_size"})
	c.checkTotal(float64(layers)*(estimate+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	attnPart := []core.Layer{norm("input_layernorm"), at}
	mlpPart := []core.Layer{norm("post_attention_layernorm"), mlp}
	if mc { // MiniCPM3DecoderLayer: each branch times scale_depth / sqrt(num_hidden_layers)
		attnPart = append(attnPart, &nn.Scale{Name: "residual_scale", Factor: depth / math.Sqrt(float64(layers))})
		mlpPart = append(mlpPart, &nn.Scale{Name: "residual_scale", Factor: depth / math.Sqrt(float64(layers))})
	}
	block := seq(res(attnPart...), res(mlpPart...))
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		blocks[i] = block
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}}
	if mc {
		ls = append(ls, &nn.Scale{Name: "embed_scale", Factor: embScale, In: "embed_tokens", Buffer: true, Rebinds: true})
	}
	ls = append(ls, stackBlocks("layers", blocks), norm("norm"))
	if mc && head == headCausalLM {
		ls = append(ls, &nn.Scale{Name: "logits_scaling", Factor: base / float64(hidden)})
	}
	return c.finish(head, ls, vocab, tie)
}
