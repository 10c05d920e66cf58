package hf

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildDeBERTa follows transformers 5.25.0's
// models/deberta_v2/modeling_deberta_v2.py for DeBERTa-v3 (microsoft/
// deberta-v3-xsmall, -small, -base, -large, mdeberta-v3-base):
//
//	embeddings: word_embeddings, LayerNorm, * the attention mask
//	            (DebertaV2Model makes one of ones without it), dropout
//	encoder:    rel_embeddings (2 x position_buckets rows) through
//	            LayerNorm once a forward, the bucketed relative_pos
//	layer i:    x = LayerNorm(x + attention(x))      attention.output
//	            x = LayerNorm(x + output(gelu(intermediate(x))))
//
// The attention is nn.DisentangledAttention, eager only: the model has no
// SDPA or flash path (attn "sdpa" and "flash" run it as noFused says).
// Heads, on DebertaV2Model as .deberta:
//
//   - DebertaV2ForMaskedLM (legacy true, the default):
//     cls.predictions.transform (dense, act, LayerNorm), the decoder tied
//     to word_embeddings with cls.predictions.bias.
//   - DebertaV2ForSequenceClassification: ContextPooler (the first
//     token, pooler_dropout, dense, pooler_hidden_act), dropout
//     (cls_dropout, else hidden_dropout_prob), classifier; with more than
//     one label the loss gathers the labelled samples' logits
//     (nn.LabelGather) and upcasts them (.float()); one label is MSE.
//   - DebertaV2ForTokenClassification: dropout (hidden_dropout_prob),
//     classifier.
//
// Refused, each not modelled: share_att_key false (pos_key_proj and
// pos_query_proj), pos_att_type other than c2p and p2c, relative_attention
// false, position_biased_input true (absolute positions),
// type_vocab_size > 0, embedding_size other than hidden_size (embed_proj),
// conv_kernel_size > 0 (DeBERTa-v2 xlarge's ConvLayer), norm_rel_ebd
// without layer_norm, attention_head_size, legacy false.
func buildDeBERTa(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	positions := c.size("max_position_embeddings")
	act := c.mlpAct("hidden_act", "gelu", false)
	pa := c.prob("attention_probs_dropout_prob", 0.1)
	po := c.prob("hidden_dropout_prob", 0.1)
	pc := c.prob("cls_dropout", po)
	pp := c.prob("pooler_dropout", 0)
	poolAct := c.mlpAct("pooler_hidden_act", "gelu", false)
	tie := c.flag("tie_word_embeddings", true)
	span := c.sizeOr("position_buckets", 0)
	if c.has("max_relative_positions") {
		if m := c.intValue("max_relative_positions", -1); span == 0 && m > 0 {
			span = m
		}
	}
	if span == 0 {
		span = positions
	}
	refuse := func(key string, bad bool, why string) {
		if bad {
			c.fail(key, "%s", why)
		}
	}
	refuse("share_att_key", !c.flag("share_att_key", false), "must be true (separate pos_key_proj and pos_query_proj are not modelled; every DeBERTa-v3 checkpoint shares them)")
	refuse("relative_attention", !c.flag("relative_attention", false), "must be true (DeBERTa without relative attention is not modelled)")
	refuse("position_biased_input", c.flag("position_biased_input", true), "must be false (absolute position embeddings are not modelled; DeBERTa-v3 has none)")
	refuse("type_vocab_size", c.has("type_vocab_size") && c.intValue("type_vocab_size", 0) > 0, "must be 0 (token type embeddings are not modelled; DeBERTa-v3 has none)")
	refuse("conv_kernel_size", c.has("conv_kernel_size") && c.intValue("conv_kernel_size", 0) > 0, "must be 0 (DeBERTa-v2's ConvLayer is not modelled)")
	refuse("attention_head_size", c.has("attention_head_size"), "must be absent (a head size other than hidden_size / num_attention_heads is not modelled)")
	refuse("legacy", !c.flag("legacy", true), "must be true (the non-legacy masked LM head is not modelled)")
	if c.has("embedding_size") && c.size("embedding_size") != hidden {
		c.fail("embedding_size", "must equal hidden_size (embed_proj is not modelled)")
	}
	if norm := strings.ToLower(c.str("norm_rel_ebd", "none")); !strings.Contains(norm, "layer_norm") {
		c.fail("norm_rel_ebd", "must be \"layer_norm\" (got %q; DeBERTa-v3's)", norm)
	}
	c.posAttType()
	labels := c.numLabels()
	if c.err == nil && hidden%heads != 0 {
		c.fail("num_attention_heads", "must divide hidden_size (got %d heads of hidden_size %d; DisentangledSelfAttention refuses it)", heads, hidden)
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inter)) + float64(vocab+2*span)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ln := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, Bias: true} }
	at := &nn.DisentangledAttention{Name: "attention", Dim: hidden, Heads: heads, Span: span, Dropout: pa, Hidden: po}
	mlp := &nn.MLP{Name: "intermediate", Dim: hidden, Hidden: inter, Act: act, Bias: true, Dropout: po,
		InName: "dense", OutName: "dense", OutModule: "output"}
	block := seq(res(at), ln("attention.output.LayerNorm"), res(mlp), ln("output.LayerNorm"))
	embed := []core.Layer{&nn.Embedding{Name: "word_embeddings", Rows: vocab, Dim: hidden}, ln("LayerNorm"), &nn.MaskMul{Dim: hidden}}
	if po > 0 {
		embed = append(embed, &nn.Dropout{Name: "dropout", P: po})
	}
	ls := []core.Layer{
		&core.Sequential{Name: "embeddings", Layers: embed},
		&core.Sequential{Name: "encoder", Layers: []core.Layer{
			&nn.RelEmbeddings{Rows: 2 * span, Dim: hidden},
			&core.Repeat{Name: "layer", Layer: block, N: layers}}},
	}
	if head != headBase {
		ls = []core.Layer{&core.Sequential{Name: "deberta", Layers: ls}}
	}
	c.ownBase = true
	var drop []core.Layer
	if pc > 0 {
		drop = []core.Layer{&nn.Dropout{Name: "dropout", P: pc}}
	}
	classifier := &nn.Linear{Name: "classifier", In: hidden, Out: labels, Bias: true, Role: "classifier"}
	switch head {
	case headMaskedLM:
		ls = append(ls, &core.Sequential{Name: "cls.predictions.transform", Layers: []core.Layer{
			&nn.Linear{Name: "dense", In: hidden, Out: hidden, Bias: true, Role: "transform"},
			&nn.Act{Name: "transform_act_fn", Fn: act}, ln("LayerNorm")}})
		m := c.finish(headCausalLM, ls, vocab, tie)
		m.HeadName = "cls.predictions.decoder"
		m.HeadBias = true
		m.LogitsFP32 = false // CrossEntropyLoss on the logits as they are
		m.HoldsEmbedding = false
		return m
	case headSeqCls:
		ls = append(ls, &nn.Pooler{Name: "pooler", Dim: hidden, Act: poolAct, InDropout: pp})
		ls = append(append(ls, drop...), classifier)
		if labels > 1 {
			m := c.finishEncoder(append(ls, &nn.LabelGather{Labels: labels}), head, labels)
			m.LogitsFP32 = true // labeled_logits.float()
			return m
		}
	case headTokenCls:
		ls = append(append(ls, drop...), classifier)
	}
	return c.finishEncoder(ls, head, labels)
}

// posAttType checks pos_att_type: "p2c|c2p" (transformers splits the
// string) or a list, naming both c2p and p2c, all DeBERTa-v3 uses.
func (c *hfConfig) posAttType() {
	var got []string
	switch v := c.raw["pos_att_type"].(type) {
	case string:
		for _, p := range strings.Split(strings.ToLower(v), "|") {
			got = append(got, strings.TrimSpace(p))
		}
	case []any:
		for _, p := range v {
			s, ok := p.(string)
			if !ok {
				c.fail("pos_att_type", "must be a list of \"c2p\" and \"p2c\" (got %s)", describeJSON(c.raw["pos_att_type"]))
				return
			}
			got = append(got, s)
		}
	}
	has := map[string]bool{}
	for _, p := range got {
		has[p] = true
	}
	if len(got) != 2 || !has["c2p"] || !has["p2c"] {
		c.fail("pos_att_type", "must name both \"c2p\" and \"p2c\" (got %s; DeBERTa-v3's, the only relative scores modelled)", describeJSON(c.raw["pos_att_type"]))
	}
}
