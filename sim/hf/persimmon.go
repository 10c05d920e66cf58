package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildPersimmon builds transformers' PersimmonForCausalLM (model_type
// persimmon: adept/persimmon-8b-base and -chat; models/persimmon/
// modeling_persimmon.py at 5.25.0): GPT-NeoX's attention (one biased
// query_key_value whose output is viewed [batch, seq, heads, 3, head_dim]
// and split into q, k and v views, a biased dense; head_dim hidden_size /
// num_attention_heads) with qk_layernorm's (default true) q_layernorm and
// k_layernorm, one nn.LayerNorm(head_dim) each over every head of q and of
// k before the transpose (nn.Attention.QKNormLayer), then the rotary
// embedding on the first partial_rotary_factor (default 0.5; rope_parameters'
// wins) of each head, the rest concatenated back (RopeCat), in sequential
// pre-norm layers of nn.LayerNorm (weight and bias):
//
//	r = x + self_attn(input_layernorm(x))
//	y = r + dropout(mlp(post_attention_layernorm(r)))
//
// PersimmonMLP is dense_h_to_4h, hidden_act (default relu2: relu, then
// square), dense_4h_to_h, biased; hidden_dropout drops its output,
// attention_dropout the probabilities. final_layernorm, then lm_head
// (unbiased, untied by default).
func buildPersimmon(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	if c.err == nil && hidden%heads != 0 {
		c.fail("num_attention_heads", "must divide hidden_size (%d): PersimmonAttention makes head_dim hidden_size // num_attention_heads (got %d)", hidden, heads)
	}
	hd := hidden / max(heads, 1)
	f := c.rotaryFactor("partial_rotary_factor", 0.5) // PersimmonConfig's __post_init__; rope_parameters' wins (configClasses)
	if n := int64(float64(hd) * f); c.err == nil && n%2 != 0 {
		// q[..., :rotary_ndims] against cos and sin of the even width
		// _compute_default_rope_parameters makes: transformers cannot
		// broadcast them
		c.fail("partial_rotary_factor", "must turn an even number of each head's %d dims (got %g: %d)", hd, f, n)
	}
	c.number("rope_theta", 10000)
	act := c.mlpAct("hidden_act", "relu2", false)
	pa, ph := c.prob("attention_dropout", 0), c.prob("hidden_dropout", 0)
	qkNorm := c.flag("qk_layernorm", true)
	tie := c.flag("tie_word_embeddings", false)
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, HeadDim: hd, QKVBias: true, OutBias: true,
		Impl: attn, Causal: true, Dropout: pa, ProbsDropoutOnly: pa > 0, Rope: true, FusedQKV: true,
		QKVName: "query_key_value", OutName: "dense", SoftmaxFP32: true, EagerMask: true,
		QKNorm: qkNorm, QKNormLayer: qkNorm, QKNormNames: [2]string{"q_layernorm", "k_layernorm"},
		RopeTables: "rotary_emb", RopeTablesDim: ropeWidth(hd, f), RopeCat: true}
	var mlp core.Layer = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: true, InName: "dense_h_to_4h", OutName: "dense_4h_to_h"}
	if ph > 0 {
		mlp = seq(mlp, &nn.Dropout{Name: "dropout", P: ph})
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, Bias: true} }
	block := seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), mlp))
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "layers", Layer: block, N: layers}, norm("final_layernorm")}
	return c.finish(head, ls, vocab, tie)
}
