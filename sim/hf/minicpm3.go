package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMiniCPM3 builds transformers' MiniCPM3ForCausalLM (model_type
// minicpm3: openbmb/MiniCPM3-4B; models/minicpm3, 5.25.0).
// modular_minicpm3.py takes Llama's model, pre-norm decoder layer, RMSNorm
// and SwiGLU MLP (gate_proj, up_proj, down_proj, biased by mlp_bias) and
// DeepSeek-V2's multi-head latent attention (MiniCPM3Attention: q through
// q_a_proj, q_a_layernorm and q_b_proj, or one unbiased q_proj when
// q_lora_rank is null; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj and
// DeepseekV2Attention's expand_kv; o_proj), rotated by Llama's
// apply_rotary_pos_emb on tables of qk_rope_head_dim (DeepSeek-V3's
// non-interleaved rope: nn.MLA as deepSeekMLA builds it), and adds three
// scalings (MiniCPM3Config's defaults scale_emb 12, scale_depth 1.4,
// dim_model_base 256):
//
//	inputs_embeds = embed_tokens(ids) * embed_scale   # Gemma3TextScaledWordEmbedding: a 0-dim buffer of scale_emb
//	x = x + self_attn(input_layernorm(x)) * (scale_depth / sqrt(num_hidden_layers))
//	x = x + mlp(post_attention_layernorm(x)) * (scale_depth / sqrt(num_hidden_layers))
//	logits = lm_head(norm(x) / (hidden_size / dim_model_base))
//
// The embedding's product keeps its 0-dim buffer for the backward
// (nn.Scale.Buffer; the forward holds the product, nn.Scale.Rebinds), the
// residual products are by a Python float and keep nothing, and the
// division before the head (MiniCPM3ForCausalLM.forward only: the base
// model has none) makes the [tokens, hidden] tensor lm_head keeps in place
// of the norm's output. scale_depth and dim_model_base null are
// sqrt(num_hidden_layers) and hidden_size (MiniCPM3Config.__post_init__):
// factors of 1, still multiplied and divided. v_head_dim null is
// hidden_size / num_attention_heads; head_dim is never read
// (__post_init__ sets it to qk_rope_head_dim), nor is num_key_value_heads
// by anything memsh models (MiniCPM3Attention's keys are per head; it
// sets only repeat_kv's group count, which SDPA's path leaves the bytes
// the same with: 2 and 40 measured). Eager attention is refused as for
// every MLA family (noEager), attention_dropout above 0 too (not
// modelled on nn.MLA).
func buildMiniCPM3(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	if heads > 0 && hidden%heads != 0 && c.err == nil {
		// MiniCPM3Config.validate_architecture, whatever v_head_dim says
		c.fail("hidden_size", "(%d) is not a multiple of num_attention_heads (%d): MiniCPM3Config refuses it (validate_architecture)", hidden, heads)
	}
	at, estimate := deepSeekMLA(c, attn)
	if pa := c.prob("attention_dropout", 0); pa > 0 && c.err == nil {
		c.fail("attention_dropout", "is not modelled for model_type minicpm3 (got %g): memsh's latent attention drops nothing; set 0", pa)
	}
	c.object("rope_scaling")
	c.object("rope_parameters")
	tie := c.flag("tie_word_embeddings", true)
	act := c.mlpAct("hidden_act", "silu", true)
	mlpBias := c.flag("mlp_bias", false)
	embScale := c.minicpm3Factor("scale_emb", 12, 0)
	depth := c.minicpm3Factor("scale_depth", 1.4, math.Sqrt(float64(layers)))
	base := c.minicpm3Factor("dim_model_base", 256, float64(hidden))
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: mlpBias}
	c.checkLayer(mlp, map[nn.Field]string{nn.FieldHidden: "intermediate_size"})
	c.checkTotal(float64(layers)*(estimate+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	resid := func() core.Layer {
		return &nn.Scale{Name: "residual_scale", Factor: depth / math.Sqrt(float64(layers))}
	}
	block := seq(res(norm("input_layernorm"), at, resid()), res(norm("post_attention_layernorm"), mlp, resid()))
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		blocks[i] = block
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&nn.Scale{Name: "embed_scale", Factor: embScale, In: "embed_tokens", Buffer: true, Rebinds: true},
		stackBlocks("layers", blocks), norm("norm")}
	if head == headCausalLM {
		ls = append(ls, &nn.Scale{Name: "logits_scaling", Factor: base / float64(hidden)})
	}
	return c.finish(head, ls, vocab, tie)
}

// minicpm3Factor reads one of MiniCPM3's scalings: a positive finite
// number, def when absent; null is nullAs where MiniCPM3Config's
// __post_init__ gives one (scale_depth, dim_model_base), refused where it
// gives none (scale_emb: the embedding multiplies by it).
func (c *hfConfig) minicpm3Factor(key string, def, nullAs float64) float64 {
	if c.null(key) {
		if nullAs == 0 {
			c.fail(key, "must be a positive number for model_type minicpm3 (got null): MiniCPM3's embedding multiplies by it")
		}
		return nullAs
	}
	v := c.number(key, def)
	if c.err == nil && (!(v > 0) || math.IsInf(v, 0)) {
		c.fail(key, "must be a positive number for model_type minicpm3 (got %g)", v)
	}
	return v
}
