package hf

// Apertus 1.5's text model (model_type apertus1p5_text:
// Apertus1p5TextForCausalLM, models/apertus1p5/modular_apertus1p5.py at
// transformers 5.25.0) is Apertus's (ApertusForCausalLM: buildDecoder,
// decoderFamily.apertus) over a vocabulary extended with the visual and
// audio codes (Apertus1p5TextConfig's vocab_size default 266,752), whose
// lm_head may be pruned to the text-only prefix: nn.Linear(hidden_size,
// output_vocab_size or vocab_size), the logits and the loss that width
// (loss_function's vocab_size=lm_head.out_features). The input embeddings
// keep vocab_size rows.

// apertus1p5Head is the width of Apertus 1.5's lm_head: output_vocab_size
// (null or left out: vocab_size), refused where
// Apertus1p5TextConfig.validate_output_vocab_size refuses it (outside
// [1, vocab_size]) and where a tied head would be pruned: post_init ties
// lm_head.weight to embed_tokens.weight, so the head's weight and logits
// are vocab_size wide while lm_head.out_features, which the loss views the
// logits by, stays output_vocab_size.
func (c *hfConfig) apertus1p5Head(vocab int64, tie bool) int64 {
	if !c.has("output_vocab_size") || c.err != nil {
		return vocab
	}
	n := c.raw["output_vocab_size"]
	out := c.intValue("output_vocab_size", -maxHFDim)
	if c.err != nil {
		return vocab
	}
	if out < 1 || out > vocab {
		c.fail("output_vocab_size", "(%s) must be in [1, vocab_size] (vocab_size is %d): Apertus1p5TextConfig refuses it (validate_output_vocab_size)", describeJSON(n), vocab)
		return vocab
	}
	if tie && out < vocab {
		c.fail("output_vocab_size", "(%d) prunes a head that tie_word_embeddings ties to the %d-row embeddings: transformers then ties a vocab_size-wide weight to an lm_head whose out_features, which its loss reads, stays %d", out, vocab, out)
		c.err.Hint = `set "tie_word_embeddings": false, as the released Apertus 1.5 checkpoints do, or leave output_vocab_size out`
		return vocab
	}
	return out
}
