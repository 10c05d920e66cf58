package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMPT follows transformers' MptForCausalLM (model_type mpt:
// mosaicml/mpt-7b, mpt-7b-instruct, mpt-30b; models/mpt/modeling_mpt.py at
// 5.25.0): transformer.wte (no position embedding: ALiBi), blocks: x +
// resid_attn_dropout(attn(norm_1(x))); x + dropout(ffn(norm_2(x))), norm_f,
// lm_head tied to wte. Every norm is a LayerNorm whose bias is set to None
// (weight only); every linear is unbiased. The attention's Wqkv is one
// fused projection chunked into q, k and v (views), out_proj its output;
// MptAttention runs its own eager attention whatever attn_implementation
// says (the model has no SDPA or flash path: noFused), adding the fp32
// ALiBi bias and masked_fill-ing by the bool causal mask
// (nn.Attention.AlibiMaskedFill), the softmax in fp32. MptMLP is up_proj
// to 4 x d_model (expansion_ratio is not read), exact GELU, down_proj.
// attn_config.attn_pdrop drops the probabilities, the attention's output
// and the MLP's (resid_pdrop and emb_pdrop are read by nothing).
// attn_config.clip_qkv (a clamp of Wqkv's output) is refused. The layers
// get no position_ids.
func buildMPT(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.firstSize("d_model", "hidden_size") // MptConfig.attribute_map
	layers := c.firstSize("n_layers", "num_hidden_layers")
	heads := c.firstSize("n_heads", "num_attention_heads")
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", true)
	var pa float64
	if c.has("attn_config") {
		ac := c.sub("attn_config")
		pa = ac.prob("attn_pdrop", 0)
		if ac.has("clip_qkv") && ac.err == nil {
			ac.fail("clip_qkv", "is not modelled (MptAttention clamps Wqkv's output to it); MPT-7B's config.json sets null")
		}
		if ac.err != nil && c.err == nil {
			c.err = ac.err
		}
	}
	if c.err == nil && hidden%heads != 0 {
		c.fail(c.firstKey("n_heads", "num_attention_heads"), "must divide d_model (%d): MptAttention makes head_dim d_model // n_heads (got %d)", hidden, heads)
	}
	hd := hidden / max(heads, 1)
	maxSeq := c.size("max_seq_len") // build_mpt_alibi_tensor's length
	inner := 4 * hidden
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inner)) + float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "attn", Dim: hidden, Heads: heads, HeadDim: hd, Impl: attn, Causal: true, Dropout: pa,
		FusedQKV: true, QKVName: "Wqkv", OutName: "out_proj", SoftmaxFP32: true, AlibiMaskedFill: true, AlibiLen: maxSeq}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden} }
	block := seq(
		res(norm("norm_1"), at),
		res(norm("norm_2"), &nn.MLP{Name: "ffn", Dim: hidden, Hidden: inner, Act: "gelu", Dropout: pa, InName: "up_proj", OutName: "down_proj"}),
	)
	ls := []core.Layer{
		&nn.Embedding{Name: "wte", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "blocks", Layer: block, N: layers},
		norm("norm_f"),
	}
	return c.finish(head, ls, vocab, tie)
}
