package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// bidirectionalSince is the first transformers release whose Gemma
// model of each type reads use_bidirectional_attention: Gemma3TextConfig
// has it from 4.57.0 (EmbeddingGemma's encoder: Gemma3Attention's
// is_causal False, the full layers' mask all true and the sliding
// layers' window both ways over sliding_window // 2 + 1;
// configuration_gemma3.py and modeling_gemma3.py of the 4.57.0 and
// 5.25.0 wheels, absent from 4.56.2's); GemmaAttention and
// Gemma2Attention read it from 5.0.0 (is_causal = not
// getattr(config, "use_bidirectional_attention", False), absent from
// 4.57.0's modeling_gemma.py and modeling_gemma2.py). VaultGemma's
// attention stays causal (is_causal = True, 5.25.0).
var bidirectionalSince = map[string][2]int{
	"gemma":       {5, 0},
	"gemma2":      {5, 0},
	"gemma3_text": {4, 57},
	"gemma3":      {4, 57}, // its text_config is a Gemma3TextConfig
}

// refuseBidirectional refuses use_bidirectional_attention true (in
// text_config for gemma3) where release v reads it: memsh builds
// Gemma's attention causal only, and a bidirectional one computes
// twice the scores, with masks of its own (Gemma 3's made from an
// or_mask_function every forward, Gemma's and Gemma 2's causal mask
// read by eager attention alone). Earlier releases ignore the key, as
// memsh then does.
func refuseBidirectional(c *hfConfig, modelType string, v [2]int) error {
	since, ok := bidirectionalSince[modelType]
	if !ok || !atLeast(v, since) {
		return nil
	}
	tc := c
	if modelType == "gemma3" {
		tc = c.sub("text_config")
		if c.err != nil {
			return c.err
		}
	}
	if tc.raw["use_bidirectional_attention"] != true {
		return nil
	}
	return &units.Error{
		Msg: fmt.Sprintf("%q is true: bidirectional attention (EmbeddingGemma's encoder) is not modelled for model_type %q; memsh builds its attention causal",
			tc.at("use_bidirectional_attention"), modelType),
		Hint: fmt.Sprintf("transformers %d.%d and later read it (every token attends to every other); the causal model is what the checkpoint trains as a decoder: drop the key, or pass an older transformers= that ignores it", since[0], since[1]),
	}
}
