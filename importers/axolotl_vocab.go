package importers

// axolotlVocabMultiple is what resize_token_embeddings_to_32x rounds the
// vocabulary to: Axolotl's _resize_token_embeddings (loaders/model.py at
// axolotl 067b021c8) resizes the embeddings to ceil(len(tokenizer) / 32)
// x 32 rows when that is more than they have.
const axolotlVocabMultiple = 32

// axolotlVocab reads resize_token_embeddings_to_32x: the vocabulary
// padded to a multiple of 32 (hf_config(vocab_multiple = 32)), embed_tokens'
// and lm_head's rows and the logits' width with it. memsh takes the
// tokenizer to have vocab_size tokens, as it does without the key (the
// special_tokens and tokens notes say when it has more): a checkpoint
// whose tokenizer has fewer, rounded up, may still fit its table and is
// then not resized, which the note says.
func axolotlVocab(t *tree) (int64, error) {
	on, err := t.boolean("resize_token_embeddings_to_32x", false)
	if err != nil || !on {
		return 0, err
	}
	t.notModelled = append(t.notModelled, "resize_token_embeddings_to_32x: the vocabulary padded up to a multiple of 32 as if the tokenizer had vocab_size tokens "+
		"(Axolotl resizes from len(tokenizer): a tokenizer with fewer, rounded up, that fits the table already, leaves it as it is)")
	return axolotlVocabMultiple, nil
}
