package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildModernBERT follows transformers 5.25.0's
// models/modernbert/modeling_modernbert.py (answerdotai/ModernBERT-base
// and -large, and the rerankers and embedders fine-tuned from them):
//
//	embeddings: tok_embeddings, norm (LayerNorm, bias norm_bias), drop
//	layer i: x = x + attn(attn_norm(x))   (layer 0's attn_norm is Identity)
//	         x = x + mlp(mlp_norm(x))
//	final_norm
//
// Every norm is a LayerNorm without bias by default (norm_bias). The
// attention is bidirectional with one Wqkv projection whose q and k are
// rotated in fp32 and cast back (apply_rotary_pos_emb), v a view of its
// output; Wo after, with attention_bias on both (default false). Layer i
// is a global (full_attention) layer when i % global_attn_every_n_layers
// is 0 (ModernBertConfig.__post_init__; layer_types when given), else a
// sliding one that sees local_attention / 2 tokens either side
// (sliding_window_bidirectional_overlay), each type with its own rotary
// pair (global_rope_theta, local_rope_theta): under SDPA and eager a
// sliding layer gets a [batch, 1, seq, seq] mask once the sequence
// reaches local_attention / 2 (nn.Attention.WindowBidir); flash computes
// the window alone. The MLP is GeGLU: Wi (2 x intermediate_size) halved,
// act(first) * second, Wo (nn.MLP.FusedName).
//
// From transformers 5.1 every attention gets the padded batch: the
// unpadding of 4.48 to 5.0 (_unpad_modernbert_input, flash_attention_2
// only) is gone,
// and flash_attention_2 unpads, as for any model, only a batch whose
// attention_mask pads; memsh models batches without padding, where
// either is the whole batch (attn="flash" picks flash_attention_2).
//
// The heads, on ModernBertModel as .model:
//
//   - ModernBertForMaskedLM (the checkpoints' class): head (dense with
//     classifier_bias, classifier_activation, norm), then decoder, tied to
//     tok_embeddings, with decoder_bias; the loss upcasts the logits
//     (ForMaskedLMLoss: logits.float()).
//   - ModernBertForSequenceClassification: the first token
//     (classifier_pooling "cls": hidden_states[:, 0], a view dense reads
//     in place) or the mean over the sequence ("mean", the published
//     configs'), then head, drop, classifier (biased).
//   - ModernBertForTokenClassification: head, drop and classifier on every
//     token.
//
// Refused: sparse_prediction (the masked LM gathers the labelled tokens,
// a number that depends on the data) and mlp_dropout (a dropout between
// the product and Wo, not modelled).
func buildModernBERT(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	act := c.mlpAct("hidden_activation", "gelu", true)
	clsAct := c.mlpAct("classifier_activation", "gelu", false)
	normBias := c.flag("norm_bias", false)
	attnBias := c.flag("attention_bias", false)
	mlpBias := c.flag("mlp_bias", false)
	decoderBias := c.flag("decoder_bias", true)
	clsBias := c.flag("classifier_bias", false)
	tie := c.flag("tie_word_embeddings", true)
	pAttn := c.prob("attention_dropout", 0)
	pEmbed := c.prob("embedding_dropout", 0)
	pCls := c.prob("classifier_dropout", 0)
	if c.prob("mlp_dropout", 0) > 0 {
		c.fail("mlp_dropout", "must be 0 (the dropout between ModernBERT's GeGLU product and Wo is not modelled; the published checkpoints have none)")
	}
	if c.flag("sparse_prediction", false) {
		c.fail("sparse_prediction", "must be false (the masked LM then keeps only the labelled tokens, a count the data decides)")
	}
	pooling := c.str("classifier_pooling", "cls")
	if pooling != "cls" && pooling != "mean" {
		c.fail("classifier_pooling", "must be \"cls\" or \"mean\" (got %q)", pooling)
	}
	every := c.sizeOr("global_attn_every_n_layers", 3)
	window := c.sizeOr("local_attention", 128) / 2
	c.number("global_rope_theta", 160000) // no size depends on the thetas
	c.number("local_rope_theta", 10000)
	labels := c.numLabels()
	if c.err == nil && hidden%heads != 0 {
		c.fail("num_attention_heads", "must divide hidden_size (got %d heads of hidden_size %d; ModernBertAttention refuses it)", heads, hidden)
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+3*float64(hidden)*float64(inter)) + float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	sliding := map[int64]bool{}
	if c.has("layer_types") {
		for i, on := range c.layerTypes(layers, "sliding_attention", "full_attention") {
			sliding[int64(i)] = on
		}
	} else {
		for i := int64(0); i < layers; i++ {
			sliding[i] = i%every != 0
		}
	}
	if c.err != nil {
		return nil
	}
	ln := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, Bias: normBias} }
	blocks := make([]core.Layer, layers)
	kinds := map[[2]bool]core.Layer{} // one block a kind: first or not, sliding or not
	for i := range blocks {
		kind := [2]bool{i == 0, sliding[int64(i)]}
		if blocks[i] = kinds[kind]; blocks[i] != nil {
			continue
		}
		at := &nn.Attention{Name: "attn", Dim: hidden, Heads: heads, HeadDim: hidden / heads, QKVBias: attnBias, OutBias: attnBias,
			Impl: attn, Dropout: pAttn, Rope: true, FusedQKV: true, QKVName: "Wqkv", OutName: "Wo", SoftmaxFP32: true,
			EagerMask: true, RopeTables: "rotary_emb_full"}
		if kind[1] {
			at.Window, at.WindowBidir, at.RopeTables = window, true, "rotary_emb_sliding"
		}
		first := []core.Layer{at}
		if i > 0 {
			first = []core.Layer{ln("attn_norm"), at}
		}
		mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: mlpBias, FusedName: "Wi", OutName: "Wo"}
		blocks[i] = seq(res(first...), res(ln("mlp_norm"), mlp))
		kinds[kind] = blocks[i]
	}
	embed := []core.Layer{&nn.Embedding{Name: "tok_embeddings", Rows: vocab, Dim: hidden}, ln("norm")}
	if pEmbed > 0 {
		embed = append(embed, &nn.Dropout{Name: "drop", P: pEmbed})
	}
	ls := []core.Layer{&core.Sequential{Name: "embeddings", Layers: embed}, stackBlocks("layers", blocks), ln("final_norm")}
	if head != headBase {
		// ModernBertForXxx holds ModernBertModel as .model.
		ls = []core.Layer{&core.Sequential{Name: "model", Layers: ls}}
	}
	c.ownBase = true
	predictionHead := func() core.Layer {
		return &core.Sequential{Name: "head", Layers: []core.Layer{
			&nn.Linear{Name: "dense", In: hidden, Out: hidden, Bias: clsBias, Role: "transform"},
			&nn.Act{Name: "act", Fn: clsAct}, ln("norm")}}
	}
	var drop []core.Layer
	if pCls > 0 {
		drop = []core.Layer{&nn.Dropout{Name: "drop", P: pCls}}
	}
	classifier := &nn.Linear{Name: "classifier", In: hidden, Out: labels, Bias: true, Role: "classifier"}
	switch head {
	case headMaskedLM:
		m := c.finish(headCausalLM, append(ls, predictionHead()), vocab, tie)
		m.HeadName = "decoder" // ModernBertForMaskedLM.decoder, a sibling of head
		m.HeadBias = decoderBias
		m.HoldsEmbedding = false // the lookup's output is ModernBertEmbeddings' local
		return m
	case headSeqCls:
		if pooling == "cls" {
			// ModernBertPredictionHead on the first token: head.dense, act, head.norm
			ls = append(ls, &nn.Pooler{Name: "head", Dim: hidden, Act: clsAct, NoBias: !clsBias}, ln("head.norm"))
		} else {
			ls = append(ls, &nn.MeanPool{Dim: hidden}, predictionHead())
		}
		ls = append(append(ls, drop...), classifier)
	case headTokenCls:
		ls = append(append(append(ls, predictionHead()), drop...), classifier)
	}
	return c.finishEncoder(ls, head, labels)
}
