package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildExaone4 builds transformers' Exaone4ForCausalLM (model_type
// exaone4: LGAI-EXAONE/EXAONE-4.0-32B and -1.2B;
// models/exaone4/modeling_exaone4.py at 5.25.0). Its decoder layer norms
// the sublayers' outputs, as OLMo 2's does:
//
//	h = x + post_attention_layernorm(self_attn(x))
//	y = h + post_feedforward_layernorm(mlp(h))
//
// with Llama's RMSNorm (Exaone4RMSNorm), and its attention norms each head
// of q and k (q_norm, k_norm of head_dim, Qwen3's) before the rotary
// embedding. The layers layer_types names "sliding_attention" attend to
// the last sliding_window keys; with a sliding_window set only they rotate
// q and k, the "full_attention" layers having no positional encoding
// (Exaone4Attention: rope where sliding_window is None or the layer
// slides), so the model's one rotary cos and sin pair reaches the sliding
// layers alone. Without layer_types, Exaone4Config's pattern: every layer
// but each sliding_window_pattern-th (default 4) slides. No projection is
// biased; the head is untied by default.
func buildExaone4(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	full, local, sliding := c.exaone4Attention(attn, layers, hidden, heads, kv, hd)
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	block := func(at *nn.Attention) core.Layer {
		return seq(res(at, norm("post_attention_layernorm")),
			res(&nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}, norm("post_feedforward_layernorm")))
	}
	blocks := slidingBlocks(sliding, block(full), block(local))
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// exaone4Attention is Exaone4Attention (buildExaone4's doc) of the
// global layers and of the sliding ones, and which layers slide.
func (c *hfConfig) exaone4Attention(attn string, layers, hidden, heads, kv, hd int64) (full, local *nn.Attention, sliding []bool) {
	c.object("rope_scaling")
	c.object("rope_parameters")
	drop := c.prob("attention_dropout", 0)
	window := c.sizeOr("sliding_window", 0) // null: no layer slides, every layer rotates
	sliding = c.exaone4Sliding(layers, window > 0)
	full = &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		Dropout: drop, Rope: true, SoftmaxFP32: true, QKNorm: true, RopeTables: "rotary_emb", EagerMask: true}
	l := *full
	l.Window = window
	if window > 0 { // the global layers' NoPE
		full.Rope, full.RopeTables = false, ""
	}
	return full, &l, sliding
}

// slidingBlocks is each layer's block: slide where sliding says so, else
// global.
func slidingBlocks(sliding []bool, global, slide core.Layer) []core.Layer {
	blocks := make([]core.Layer, len(sliding))
	for i, on := range sliding {
		blocks[i] = global
		if on {
			blocks[i] = slide
		}
	}
	return blocks
}

// exaone4Sliding lists the sliding layers: layer_types, else
// Exaone4Config's pattern (slidingPattern); a null sliding_window without
// layer_types makes that pattern 0, by which transformers 5.25.0 fails
// dividing.
func (c *hfConfig) exaone4Sliding(layers int64, windowed bool) []bool {
	if !windowed && !c.has("layer_types") {
		c.fail("layer_types", "must be given when sliding_window is null (Exaone4Config's pattern is then 0: transformers fails dividing by it)")
		return make([]bool, max(layers, 0))
	}
	return c.slidingPattern(layers)
}

// slidingPattern lists the sliding layers of EXAONE 4.0 and Cohere 2:
// layer_types, else every layer but each sliding_window_pattern-th (an
// integer, default 4; a string such as "LLLG", which published configs
// carry beside their layer_types, makes transformers 5.25.0 fail: int %
// str).
func (c *hfConfig) slidingPattern(layers int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	sliding := make([]bool, max(layers, 0))
	if v, set := c.raw["sliding_window_pattern"]; set {
		if _, ok := v.(json.Number); !ok {
			c.fail("sliding_window_pattern", "must be an integer without layer_types (got %s; transformers 5.25.0 reads a pattern string such as \"LLLG\" only through the layer_types beside it)",
				describeJSON(v))
			return sliding
		}
	}
	p := max(c.sizeOr("sliding_window_pattern", 4), 1) // below 1: c.err's already
	for i := range sliding {
		sliding[i] = (int64(i)+1)%p != 0
	}
	return sliding
}
