package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildCohere2 builds transformers' Cohere2ForCausalLM (model_type
// cohere2: CohereLabs/c4ai-command-r7b-12-2024, command-a-03-2025;
// models/cohere2/modeling_cohere2.py at 5.25.0). Its decoder layer runs
// the attention and the MLP side by side on one norm's output:
//
//	h = input_layernorm(x); y = x + self_attn(h) + mlp(h)
//
// Every norm is Cohere2LayerNorm (nn.CohereNorm: a weight, no bias, in
// fp32). head_dim is hidden_size / num_attention_heads whatever the config
// says (Cohere2Config sets it so). The layers layer_types names
// "sliding_attention" attend to the last sliding_window keys and alone
// rotate q and k (Cohere2Attention: rope where the layer has a window, so
// with sliding_window null no layer does); the "full_attention" layers
// have no positional encoding. Without layer_types every
// sliding_window_pattern-th layer (4) is full. The rope pairs adjacent
// dimensions on q and k cast to fp32 and back, with rotary_emb's cos and
// sin in the model's dtype. attention_bias (default false) biases q, k, v
// and o; the MLP is Llama's without biases; the head is tied by default
// and multiplies the logits by logit_scale (default 0.0625).
//
// Cohere's first model (model_type cohere: CohereLabs/c4ai-command-r-v01,
// -08-2024, c4ai-command-r-plus, aya-23-8B and -35B, aya-expanse-8b and
// -32b; models/cohere/modeling_cohere.py at 5.25.0) is the same layer
// rotating q and k in every layer, no window: CohereAttention takes
// head_dim from the config when it has one (getattr(config, "head_dim",
// hidden_size // num_attention_heads)), and with use_qk_norm (default
// false) norms each head of q and k before the rope with a
// CohereLayerNorm of [heads, head_dim] weights (q_norm, k_norm:
// nn.Attention.QKNormCohere).
func buildCohere2(c *hfConfig, attn string, head hfHead) *core.Model {
	v1 := c.modelType == "cohere"
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	if c.err == nil && !v1 && hidden%heads != 0 {
		c.fail("num_attention_heads", "must divide hidden_size (%d): Cohere2Config makes head_dim hidden_size / num_attention_heads (got %d)", hidden, heads)
	}
	if !v1 {
		hd = hidden / max(heads, 1) // Cohere2Config sets head_dim so
	}
	k := c.cohereKeys()
	tie, bias, act, drop, scale := k.tie, k.bias, k.act, k.drop, k.scale
	var window int64
	sliding := make([]bool, max(layers, 0))
	if !v1 {
		window = c.sizeOr("sliding_window", 0) // null: no layer slides or rotates
		sliding = c.slidingPattern(layers)
	}
	qkNorm := v1 && c.flag("use_qk_norm", false)
	if c.err != nil {
		return nil
	}
	full := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Dropout: drop, SoftmaxFP32: true, EagerMask: true, QKNorm: qkNorm, QKNormCohere: qkNorm}
	if v1 {
		full.Rope, full.RopeTables = true, "rotary_emb"
	}
	local := *full
	if window > 0 {
		local.Window, local.Rope, local.RopeTables = window, true, "rotary_emb"
	}
	norm := func(name string) core.Layer { return &nn.CohereNorm{Name: name, Dim: hidden} }
	block := func(at *nn.Attention) core.Layer {
		mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
		return res(norm("input_layernorm"), &nn.Parallel{Branches: []core.Layer{at, mlp}})
	}
	blocks := slidingBlocks(sliding, block(full), block(&local))
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.LogitScale = 1 / scale // Model.LogitScale divides; Cohere2ForCausalLM multiplies
	}
	return m
}

// cohereKeys are the keys Cohere's decoders (cohere, cohere2,
// cohere2_moe) read alike around their layers.
type cohereKeys struct {
	tie, bias   bool
	act         string
	drop, scale float64
}

func (c *hfConfig) cohereKeys() cohereKeys {
	c.object("rope_scaling")
	c.object("rope_parameters")
	k := cohereKeys{tie: c.flag("tie_word_embeddings", true), bias: c.flag("attention_bias", false),
		act: c.mlpAct("hidden_act", "silu", true), drop: c.prob("attention_dropout", 0), scale: c.number("logit_scale", 0.0625)}
	if !(k.scale > 0) {
		c.fail("logit_scale", "must be a positive number (got %g): the head multiplies the logits by it", k.scale)
	}
	return k
}
