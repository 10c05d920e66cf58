package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildPhi builds transformers' PhiForCausalLM (model_type phi:
// microsoft/phi-1, phi-1_5, phi-2; models/phi/modeling_phi.py at 5.25.0).
// Each layer runs the attention and the MLP side by side on one
// nn.LayerNorm's output (PhiDecoderLayer):
//
//	h = input_layernorm(x)
//	y = x + resid_dropout(self_attn(h)) + resid_dropout(mlp(h))
//
// q_proj, k_proj, v_proj and dense are biased; the rotary embedding turns
// the first partial_rotary_factor (default 0.5) of each head, sliced off
// q and k after their transpose, and cats the rest back (RopeCat); the
// MLP is fc1, hidden_act (gelu_new), fc2, biased. The embeddings drop by
// embd_pdrop (embed_dropout), the probabilities by attention_dropout, each
// branch's output by resid_pdrop; final_layernorm, then lm_head with a
// bias, untied by default. qk_layernorm (default false; no published
// checkpoint sets it) is refused.
func buildPhi(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	rotary := ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 0.5))
	c.object("rope_scaling")
	c.number("rope_theta", 10000)
	act := c.mlpAct("hidden_act", "gelu_new", false)
	pa, po, pe := c.prob("attention_dropout", 0), c.prob("resid_pdrop", 0), c.prob("embd_pdrop", 0)
	tie := c.flag("tie_word_embeddings", false)
	if c.flag("qk_layernorm", false) {
		c.fail("qk_layernorm", "is not modelled yet (PhiAttention's q_layernorm and k_layernorm over each head); set it false")
	}
	c.checkTotal(float64(layers)*(2*float64(hidden)*float64(heads*hd)+2*float64(hidden)*float64(kv*hd)+2*float64(hidden)*float64(inter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: true, OutBias: true, OutName: "dense",
		Impl: attn, Causal: true, Dropout: pa, ProbsDropoutOnly: pa > 0, Rope: true, SoftmaxFP32: true, EagerMask: true,
		RopeTables: "rotary_emb", RopeTablesDim: rotary, RopeCat: true}
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: true}
	branch := func(l core.Layer) core.Layer {
		if po == 0 {
			return l
		}
		return seq(l, &nn.Dropout{Name: "resid_dropout", P: po})
	}
	block := res(&nn.Norm{Name: "input_layernorm", Dim: hidden, Bias: true}, &nn.Parallel{Branches: []core.Layer{branch(at), branch(mlp)}})
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}}
	if pe > 0 {
		ls = append(ls, &nn.Dropout{Name: "embed_dropout", P: pe})
	}
	ls = append(ls, &core.Repeat{Name: "layers", Layer: block, N: layers}, &nn.Norm{Name: "final_layernorm", Dim: hidden, Bias: true})
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.HeadBias = true // PhiForCausalLM's lm_head
	}
	return m
}
