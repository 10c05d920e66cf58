package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildStableLM builds transformers' StableLmForCausalLM (model_type
// stablelm: stabilityai/stablelm-2-1_6b, stablelm-2-zephyr-1_6b,
// stablelm-3b-4e1t, stablelm-zephyr-3b; models/stablelm/modeling_stablelm.py
// at 5.25.0): Llama's gated MLP (gate_proj, up_proj, down_proj, no bias)
// in layers normed by nn.LayerNorm (weight and bias),
//
//	r = x + self_attn(input_layernorm(x))
//	y = r + dropout(mlp(post_attention_layernorm(r)))
//
// or with use_parallel_residual (default false) one norm for both,
// y = x + self_attn(h) + dropout(mlp(h)), h = input_layernorm(x), and no
// post_attention_layernorm. q, k and v are biased by use_qkv_bias (default
// false), o_proj never; head_dim is hidden_size / num_attention_heads; the
// rope turns the first partial_rotary_factor (default 0.25) of each head,
// sliced off q and k after their transpose, and cats the rest back
// (RopeCat). The MLP's output drops by hidden_dropout, the probabilities
// by attention_dropout. qk_layernorm (StableLmLayerNormPerHead: a
// LayerNorm module per head; StableLM 2 12B's) is refused.
func buildStableLM(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	if c.err == nil && hidden%heads != 0 {
		c.fail("num_attention_heads", "must divide hidden_size (%d): StableLmAttention makes head_dim hidden_size // num_attention_heads and o_proj reads hidden_size inputs (got %d)", hidden, heads)
	}
	hd := hidden / max(heads, 1)
	rotary := ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 0.25))
	c.object("rope_scaling")
	c.number("rope_theta", 10000)
	act := c.mlpAct("hidden_act", "silu", true)
	pa, ph := c.prob("attention_dropout", 0), c.prob("hidden_dropout", 0)
	tie := c.flag("tie_word_embeddings", false)
	parallel := c.flag("use_parallel_residual", false)
	bias := c.flag("use_qkv_bias", false)
	if c.flag("qk_layernorm", false) {
		c.fail("qk_layernorm", "is not modelled yet (StableLmLayerNormPerHead's LayerNorm per head of q and k, StableLM 2 12B's); set it false")
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias,
		Impl: attn, Causal: true, Dropout: pa, ProbsDropoutOnly: pa > 0, Rope: true, SoftmaxFP32: true, EagerMask: true,
		RopeTables: "rotary_emb", RopeTablesDim: rotary, RopeCat: true}
	var mlp core.Layer = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	if ph > 0 {
		mlp = seq(mlp, &nn.Dropout{Name: "dropout", P: ph})
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, Bias: true} }
	var block core.Layer = seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), mlp))
	if parallel {
		block = res(norm("input_layernorm"), &nn.Parallel{Branches: []core.Layer{at, mlp}})
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "layers", Layer: block, N: layers}, norm("norm")}
	return c.finish(head, ls, vocab, tie)
}
