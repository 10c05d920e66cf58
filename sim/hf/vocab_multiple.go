package hf

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/memsh/memsh/sim/units"
)

// padVocab rounds config.json's vocab_size up to a multiple of n, as
// model.resize_token_embeddings(ceil(len(tokenizer) / n) * n) leaves it
// when the tokenizer has vocab_size tokens: Axolotl's
// resize_token_embeddings_to_32x (loaders/model.py
// _resize_token_embeddings at axolotl 067b021c8, n = 32), which resizes
// only to grow the table (or with shrink_embeddings). embed_tokens and
// lm_head get the new rows, and the logits are as wide. The top level's
// vocab_size and text_config's (a vision-language model's language
// model, whose embeddings get_input_embeddings returns) are padded where
// config.json has them; a config.json with neither is refused: its
// vocabulary is the config class's default, which memsh does not pad.
func (c *hfConfig) padVocab(n int64) error {
	if n <= 0 {
		return nil
	}
	if n > 1<<20 {
		return &units.Error{Msg: fmt.Sprintf("vocab_multiple=%d is too large", n), Hint: "a multiple such as 32 or 64 (Axolotl's resize_token_embeddings_to_32x is 32)"}
	}
	padded := false
	for _, obj := range []map[string]any{c.raw, subObject(c.raw, "text_config")} {
		if obj == nil {
			continue
		}
		num, ok := obj["vocab_size"].(json.Number)
		if !ok {
			continue
		}
		v, err := num.Int64()
		if err != nil || v <= 0 || v > maxHFDim {
			continue // the family's own read of vocab_size says what is wrong with it
		}
		obj["vocab_size"] = json.Number(strconv.FormatInt((v+n-1)/n*n, 10))
		padded = true
	}
	if !padded {
		return &units.Error{Msg: "vocab_multiple= needs config.json's vocab_size (or text_config's): it has none",
			Hint: "add the tokenizer's vocabulary as vocab_size to config.json, or leave vocab_multiple= out"}
	}
	return nil
}

// subObject is obj[key] when it is a JSON object, else nil.
func subObject(obj map[string]any, key string) map[string]any {
	m, _ := obj[key].(map[string]any)
	return m
}
