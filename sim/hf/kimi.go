package hf

import (
	"github.com/memsh/memsh/sim/core"
)

// buildKimiK25 builds the text model of transformers'
// Kimi_K25ForConditionalGeneration (model_type kimi_k25: Kimi K2.5;
// modeling_kimi_k25.py, first in the 5.13.0 wheel): its text_config is
// Kimi K2's, DeepSeek-V3's architecture (model_type "kimi_k2", read as
// deepseek_v3, as Kimi_K25Config does), built by buildDeepSeek and named
// model.language_model, with lm_head beside it (tied to the embedding
// when the top-level tie_word_embeddings, default true, says so). The vision tower
// (MoonViT: model.vision_tower) and the projector (model.mm_projector)
// are not built: their weights are not counted and train(images=) is
// refused (the model has no vision tower), so the count is the text
// model's, 471,143,920 below transformers' at Kimi K2.5's vision sizes
// (sim/hfconfig_kimi_test.go).
func buildKimiK25(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	if mt := tc.str("model_type", "deepseek_v3"); mt != "kimi_k2" && mt != "deepseek_v3" {
		tc.fail("model_type", "must be Kimi K2's, \"kimi_k2\" or \"deepseek_v3\" (got %q)", mt)
	}
	tc.modelType, tc.mtp = "deepseek_v3", c.mtp
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m := buildDeepSeek(tc, attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	// Kimi_K25Config's own tie_word_embeddings (default True) ties lm_head
	// to the language model's embedding, whatever text_config says.
	m.TieEmbeddings = c.flag("tie_word_embeddings", true)
	if c.err != nil {
		return nil
	}
	m.Layers = []core.Layer{&core.Sequential{Name: "language_model", Layers: m.Layers}}
	return m
}
