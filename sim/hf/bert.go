package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildBERT follows transformers/models/bert/modeling_bert.py. The body is
// BertEmbeddings (word, token-type and absolute position tables, then
// LayerNorm and dropout) and post-norm layers:
//
//	x = LayerNorm(x + dropout(attention(x)))        attention.output.LayerNorm
//	x = LayerNorm(x + dropout(output(gelu(intermediate(x)))))   output.LayerNorm
//
// with biases on every projection. The head follows the model class:
//
//   - BertForMaskedLM (the default: bert-base-uncased's config names it):
//     cls.predictions.transform (dense, act, LayerNorm), then the decoder
//     tied to the word embeddings plus its own vocab-sized bias. No pooler
//     (add_pooling_layer=False).
//   - BertModel: the pooler (first token, dense, tanh); no loss head (the
//     loss sums the pooled output).
//   - BertForSequenceClassification: pooler, dropout, classifier
//     (hidden x num_labels, biased); cross-entropy, or MSE for one label.
//   - BertForTokenClassification: dropout and classifier on every token,
//     no pooler.
//
// num_labels is the size of id2label when present (as PretrainedConfig
// derives it), else num_labels, else 2. The eager attention adds the
// extended attention mask to the scores (fp32 under autocast: the sum is
// promoted), runs softmax and dropout in that dtype and lets the P.V
// matmul cast (nn.Attention's MaskAdd and CastAtMatmul). transformers 5.0
// moved BERT onto the shared attention interface and gave it a
// flash-attention 2 path (hfFamily.flashSince); 4.x has none.
//
// RoBERTa and XLM-RoBERTa (models/roberta/modular_roberta.py;
// xlm_roberta's modelling is the same code renamed) are BERT's layers
// under another base name, "roberta", with three differences:
//
//   - RobertaEmbeddings numbers positions from padding_idx + 1
//     (create_position_ids_from_input_ids: a cumsum over the ids' non-pad
//     mask, a [batch, seq] tensor per sample), so max_position_embeddings
//     (514) serves pad_token_id + 1 fewer tokens (512); the token types
//     are the token_type_ids buffer gathered at those positions, [batch,
//     seq] too, from transformers 5.0 (tokenTypeGatherSince; before, a
//     view of the buffer). RoBERTa's tokenizers hand no token_type_ids
//     (model_input_names is input_ids and attention_mask).
//   - RobertaLMHead: lm_head.dense, gelu (always), lm_head.layer_norm, then
//     lm_head.decoder tied to the word embeddings, with lm_head.bias.
//   - RobertaForSequenceClassification has no pooler: its
//     RobertaClassificationHead takes the first token, dropout,
//     classifier.dense, tanh, dropout, classifier.out_proj.
//
// BERT's position ids are position_ids[:, :seq], a view of the buffer (no
// new storage; nn.AddEmbedding.BufferIDs). Its token types are the
// tokenizer's [batch, seq] int64 (BertTokenizer's model_input_names holds
// token_type_ids, and the Trainer hands the forward every column it
// takes), saved by the lookup. A batch without them
// (hf_config(token_type_ids=False)) makes its own: setBERTTokenTypes.
func buildBERT(c *hfConfig, attn string, head hfHead) *core.Model {
	roberta := c.modelType != "bert"
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	vocab := c.size("vocab_size")
	inter := c.size("intermediate_size")
	positions := c.size("max_position_embeddings")
	types := c.sizeOr("type_vocab_size", 2)
	act := c.mlpAct("hidden_act", "gelu", false)
	pa := c.prob("attention_probs_dropout_prob", 0.1)
	po := c.prob("hidden_dropout_prob", 0.1)
	pc := c.prob("classifier_dropout", po)
	tie := c.flag("tie_word_embeddings", true)
	causal := c.flag("is_decoder", false)
	if pet := c.str("position_embedding_type", "absolute"); pet != "absolute" {
		c.fail("position_embedding_type", "must be \"absolute\" (got %q; relative position embeddings are not supported yet)", pet)
	}
	if c.flag("add_cross_attention", false) {
		c.fail("add_cross_attention", "must be false (cross-attention needs an encoder's states; not supported)")
	}
	labels := c.numLabels()
	maxSeq, base := positions, "bert"
	if roberta {
		base = "roberta"
		pad := c.sizeOr("pad_token_id", 1)
		if c.err == nil && pad+1 >= positions {
			c.fail("max_position_embeddings", "must exceed pad_token_id + 1 (got %d, pad_token_id %d): RoBERTa numbers positions from pad_token_id + 1", positions, pad)
		}
		maxSeq = positions - pad - 1
	}
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	drop, after := c.attnDropout("attention_probs_dropout_prob", pa, po, "attention.output.dropout")
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inter)) + float64(vocab+positions+types)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ln := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, Bias: true} }
	at := &nn.Attention{Name: "attention", Dim: hidden, Heads: heads, HeadDim: hd, QKVBias: true, OutBias: true,
		Impl: attn, Causal: causal, Dropout: drop, MaskAdd: true, CastAtMatmul: true,
		SelfName: "self", QKVNames: [3]string{"query", "key", "value"}, OutName: "output.dense"}
	mlp := &nn.MLP{Name: "intermediate", Dim: hidden, Hidden: inter, Act: act, Bias: true, Dropout: po,
		InName: "dense", OutName: "dense", OutModule: "output"}
	block := seq(
		res(append([]core.Layer{at}, after...)...), ln("attention.output.LayerNorm"),
		res(mlp), ln("output.LayerNorm"),
	)
	embed := []core.Layer{
		&nn.Embedding{Name: "word_embeddings", Rows: vocab, Dim: hidden},
		&nn.AddEmbedding{Name: "token_type_embeddings", Rows: types, Dim: hidden, PerSample: true,
			Buffer: "token_type_ids", BufferLen: positions},
		&nn.AddEmbedding{Name: "position_embeddings", Rows: positions, Dim: hidden, MaxSeq: maxSeq, PerSample: roberta,
			BufferIDs: !roberta, Buffer: "position_ids", BufferLen: positions},
		ln("LayerNorm"),
	}
	if po > 0 {
		embed = append(embed, &nn.Dropout{Name: "dropout", P: po})
	}
	ls := []core.Layer{
		&core.Sequential{Name: "embeddings", Layers: embed},
		&core.Sequential{Name: "encoder", Layers: []core.Layer{&core.Repeat{Name: "layer", Layer: block, N: layers}}},
	}
	classifier := &nn.Linear{Name: "classifier", In: hidden, Out: labels, Bias: true, Role: "classifier"}
	var clsDrop []core.Layer
	if pc > 0 {
		clsDrop = []core.Layer{&nn.Dropout{Name: "dropout", P: pc}}
	}
	if head == headSeqCls && !roberta {
		ls = append(ls, &nn.Pooler{Name: "pooler", Dim: hidden})
	}
	if head != headBase {
		// BertForXxx holds BertModel as .bert, which prefixes its
		// parameters: bert.encoder.layer.0... (the heads are its siblings).
		ls = []core.Layer{&core.Sequential{Name: base, Layers: ls}}
	}
	c.ownBase = true
	switch head {
	case headMaskedLM:
		var m *core.Model
		if roberta {
			ls = append(ls, &core.Sequential{Name: "lm_head", Layers: []core.Layer{
				&nn.Linear{Name: "dense", In: hidden, Out: hidden, Bias: true, Role: "transform"},
				&nn.Act{Fn: "gelu"}, // RobertaLMHead calls gelu(x): no module
				ln("layer_norm")}})
			m = c.finish(headCausalLM, ls, vocab, tie)
			m.HeadName = "lm_head.decoder"
		} else {
			ls = append(ls, &core.Sequential{Name: "cls.predictions.transform", Layers: []core.Layer{
				&nn.Linear{Name: "dense", In: hidden, Out: hidden, Bias: true, Role: "transform"},
				&nn.Act{Name: "transform_act_fn", Fn: act},
				ln("LayerNorm")}})
			m = c.finish(headCausalLM, ls, vocab, tie)
			m.HeadName = "cls.predictions.decoder"
		}
		m.HeadBias = true
		m.LogitsFP32 = false // BertForMaskedLM calls CrossEntropyLoss on the logits as they are
		m.HoldsEmbedding = false
		return m
	case headBase:
		ls = append(ls, &nn.Pooler{Name: "pooler", Dim: hidden})
	case headSeqCls:
		if roberta { // RobertaClassificationHead: classifier.dense, classifier.dropout (twice), classifier.out_proj
			ls = append(ls, &nn.Pooler{Name: "classifier", Dim: hidden, InDropout: pc})
			if pc > 0 {
				ls = append(ls, &nn.Dropout{Name: "classifier.dropout", P: pc})
			}
			ls = append(ls, &nn.Linear{Name: "classifier.out_proj", In: hidden, Out: labels, Bias: true, Role: "classifier"})
		} else {
			ls = append(append(ls, clsDrop...), classifier)
		}
	case headTokenCls:
		ls = append(append(ls, clsDrop...), classifier)
	}
	return c.finishEncoder(ls, head, labels)
}

// finishEncoder is an encoder's model with a classification head (or
// none: the base model): cross-entropy over the labels, or MSE for one
// (problem_type "regression"). The embedding lookup runs inside the
// embeddings module, whose locals are gone when it returns.
func (c *hfConfig) finishEncoder(ls []core.Layer, head hfHead, labels int64) *core.Model {
	m := c.finish(headBase, ls, 0, false)
	m.HoldsEmbedding = false
	if head != headBase {
		m.Loss = "cross_entropy"
		if labels == 1 {
			m.Loss = "mse"
		}
	}
	return m
}

// numLabels is PretrainedConfig's num_labels: len(id2label), else
// num_labels, else 2.
func (c *hfConfig) numLabels() int64 {
	if c.has("id2label") {
		m, ok := c.raw["id2label"].(map[string]any)
		if !ok || len(m) == 0 {
			c.fail("id2label", "must be a non-empty object of labels (got %s)", describeJSON(c.raw["id2label"]))
			return 2
		}
		return int64(len(m))
	}
	return c.sizeOr("num_labels", 2)
}

// setBERTTokenTypes makes BERT's token-type ids the embeddings' own, for
// a batch without token_type_ids (Options.NoTokenTypes): BertEmbeddings
// reads its token_type_ids buffer. From tokenTypeGatherSince it gathers
// it at position_ids[:, :seq] (torch.gather(buffer.expand(1, -1), 1,
// position_ids), then .expand(batch, seq)): a new [1, seq] int64 the
// lookup saves, its output [1, seq, hidden] added over the batch; before,
// buffer[:, :seq].expand(batch, seq), a view (the lookup's output [batch,
// seq, hidden]). Measured (tools/oracle/loss_labels.py, bert-tiny.json,
// transformers 5.25.0, torch 2.15.0, 16 tokens): without token_type_ids a
// gather of [1, 16] int64, 128 B, at batch 1 and 2 alike, saved, freed in
// the backward; with them none (the batch's are saved).
func setBERTTokenTypes(layers []core.Layer, gather bool) {
	forTokenTypes(layers, func(e *nn.AddEmbedding) { e.PerSample, e.BufferIDs = !gather, !gather })
}

// setTokenTypeView sets whether RoBERTa's token-type ids are a view of
// its buffer (before tokenTypeGatherSince) or a new [batch, seq] gather.
func setTokenTypeView(layers []core.Layer, view bool) {
	forTokenTypes(layers, func(e *nn.AddEmbedding) { e.BufferIDs = view })
}

// forTokenTypes calls set on the token_type_embeddings of layers.
func forTokenTypes(layers []core.Layer, set func(*nn.AddEmbedding)) {
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		if e, ok := l.(*nn.AddEmbedding); ok && e.Name == "token_type_embeddings" {
			set(e)
		}
		for _, c := range l.Children() {
			walk(c)
		}
	}
	for _, l := range layers {
		walk(l)
	}
}
