package hf

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildRecurrentGemma is transformers' RecurrentGemmaForCausalLM (Google's
// RecurrentGemma-2B and -9B, Griffin; models/recurrent_gemma/
// modeling_recurrent_gemma.py and configuration_recurrent_gemma.py at
// 5.25.0). The embeddings times the model's normalizer buffer
// (sqrt(hidden_size), a 0-dim buffer in the parameters' dtype), then
// layers whose temporal block follows block_types over and over
// (("recurrent", "recurrent", "attention") by default): a recurrent
// block (nn.RecurrentBlock: the RG-LRU's PyTorch loop, as transformers
// trains it) or local attention (attention_window_size tokens, heads of
// hidden_size // num_attention_heads, num_key_value_heads, rotary on
// partial_rotary_factor of each head (0.5 by default), its cos and sin
// made in each layer by its own rotary_emb, o_proj biased), each
// layer
//
//	x = x + temporal_block(temporal_pre_norm(x))
//	x = x + mlp_block(channel_pre_norm(x))              gelu_tanh(gate_proj) * up_proj, down_proj, biased, intermediate_size / 2
//
// with Gemma's RMSNorm, final_norm, lm_head tied to the embeddings and
// the logits soft-capped at logits_soft_cap.
func buildRecurrentGemma(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	inter := c.size("intermediate_size")
	width := c.sizeOr("lru_width", hidden)
	kv := c.kvHeads("num_key_value_heads", heads)
	window := c.sizeOr("attention_window_size", 2048)
	tie := c.flag("tie_word_embeddings", true)
	cap := c.softcap("logits_soft_cap", 30)
	act := c.mlpAct("hidden_activation", "gelu_pytorch_tanh", true)
	kinds := c.recurrentGemmaTypes(layers)
	partial := c.number("partial_rotary_factor", 0.5)
	if c.err == nil && (partial <= 0 || partial > 1) {
		c.fail("partial_rotary_factor", "must be in (0, 1] (got %g)", partial)
	}
	if c.err == nil && heads > hidden {
		c.fail("num_attention_heads", "(%d) is more than hidden_size (%d): a head would be 0 wide (head_dim is hidden_size // num_attention_heads)", heads, hidden)
	}
	if c.err == nil && width%heads != 0 {
		c.fail("lru_width", "(%d) must be a multiple of num_attention_heads (%d): the RG-LRU's gates are one block a head", width, heads)
	}
	if c.err == nil && inter%2 != 0 {
		c.fail("intermediate_size", "(%d) must be even: the MLP is intermediate_size // 2 wide", inter)
	}
	if c.err != nil {
		return nil
	}
	if rp, ok := c.raw["rope_scaling"].(map[string]any); ok {
		if t, _ := rp["rope_type"].(string); t != "" && t != "default" {
			c.fail("rope_scaling", "has rope_type %q: RecurrentGemmaRotaryEmbedding supports the default alone", t)
			return nil
		}
	}
	hd := hidden / heads
	rec := &nn.RecurrentBlock{Name: "temporal_block", Dim: hidden, Width: width, Heads: heads, ConvK: c.sizeOr("conv1d_width", 4),
		Act: c.mlpAct("hidden_activation", "gelu_pytorch_tanh", false)}
	c.checkLayer(rec, map[nn.Field]string{nn.FieldInner: "lru_width", nn.FieldHeads: "num_attention_heads", nn.FieldConvKernel: "conv1d_width"})
	mlp := &nn.MLP{Name: "mlp_block", Dim: hidden, Hidden: inter / 2, Act: act, Bias: true}
	c.checkLayer(mlp, map[nn.Field]string{nn.FieldHidden: "intermediate_size"})
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "temporal_block", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: c.flag("attention_bias", false),
		OutBias: true, Impl: attn, Causal: true, SoftmaxFP32: true, EagerMask: true, ProbsDropoutOnly: true, Dropout: c.prob("attention_dropout", 0),
		Window: window, Rope: true, RopeTablesDim: ropeWidth(hd, partial), RopeCat: true}
	c.checkTotal(float64(layers)*float64(max(rec.Params(), at.Params())+mlp.Params()) + float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.GemmaNorm{Name: name, Dim: hidden} }
	recurrent := seq(res(norm("temporal_pre_norm"), rec), res(norm("channel_pre_norm"), mlp))
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		if !kinds[i] {
			blocks[i] = recurrent
			continue
		}
		a := *at // each layer's own rotary_emb makes its cos and sin
		a.RopeTables, a.RopeTablesOwn = fmt.Sprintf("layers.%d.temporal_block.rotary_emb", i), true
		blocks[i] = seq(res(norm("temporal_pre_norm"), &a), res(norm("channel_pre_norm"), mlp))
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&nn.Scale{Name: "normalizer", Factor: math.Sqrt(float64(hidden)), Buffer: true},
		stackBlocks("layers", blocks), &nn.GemmaNorm{Name: "final_norm", Dim: hidden}}
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.LogitSoftcap = cap
	}
	return m
}

// recurrentGemmaTypes reads block_types, repeated over the layers
// (RecurrentGemmaConfig.layers_block_type): true for "attention", false
// for "recurrent".
func (c *hfConfig) recurrentGemmaTypes(layers int64) []bool {
	list := []any{"recurrent", "recurrent", "attention"}
	if c.has("block_types") {
		l, ok := c.raw["block_types"].([]any)
		if !ok || len(l) == 0 {
			c.fail("block_types", "must be a list of block types, \"recurrent\" or \"attention\" (got %s)", describeJSON(c.raw["block_types"]))
			return nil
		}
		list = l
	}
	out := make([]bool, layers)
	for i := range out {
		switch v := list[i%len(list)]; v {
		case "recurrent":
		case "attention":
			out[i] = true
		default:
			c.fail("block_types", "entry %d must be \"recurrent\" or \"attention\" (got %s)", i%len(list), describeJSON(v))
			return nil
		}
	}
	return out
}
