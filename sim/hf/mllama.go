package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildMllama builds transformers' MllamaForConditionalGeneration (Llama
// 3.2 Vision): model.vision_model and model.multi_modal_projector
// (vision_config; nn.MllamaVision), then model.language_model (text_config):
// a Llama decoder whose embed_tokens has vocab_size + 8 rows and whose
// layers at cross_attention_layers are gated cross-attention layers
// (nn.MllamaCrossBlock) reading the projected image states; lm_head has
// vocab_size rows. Defaults are MllamaVisionConfig's and
// MllamaTextConfig's (configuration_mllama.py).
func buildMllama(c *hfConfig, attn string, head hfHead) *core.Model {
	vc, tc := c.sub("vision_config"), c.sub("text_config")
	if c.err != nil {
		return nil
	}
	tc.classKeys("mllama_text_model") // MllamaTextConfig's defaults
	tc.modelType, tc.name = "llama", c.name
	hidden := tc.size("hidden_size")
	v := &nn.MllamaVision{Dim: vc.sizeOr("hidden_size", 1280), Layers: vc.sizeOr("num_hidden_layers", 32),
		GlobalLayers: vc.intOr("num_global_layers", 8), Inter: vc.sizeOr("intermediate_size", 5120),
		Image: vc.sizeOr("image_size", 448), Patch: vc.sizeOr("patch_size", 14), Tiles: vc.sizeOr("max_num_tiles", 4),
		Channels: vc.sizeOr("num_channels", 3), OutputDim: vc.sizeOr("vision_output_dim", 7680), TextDim: hidden, Impl: attn}
	v.Heads = vc.sizeOr("num_attention_heads", 16)
	if vc.has("attention_heads") { // the name MllamaVisionConfig stores and saves
		v.Heads = vc.size("attention_heads")
	}
	v.AspectRatios = 8 // the default [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]
	if vc.has("supported_aspect_ratios") {
		list, ok := vc.raw["supported_aspect_ratios"].([]any)
		if !ok || len(list) == 0 {
			vc.fail("supported_aspect_ratios", "must be a list of [rows, columns] pairs (got %s)", describeJSON(vc.raw["supported_aspect_ratios"]))
		}
		v.AspectRatios = int64(len(list))
	}
	if vc.has("intermediate_layers_indices") {
		idx := vc.intList("intermediate_layers_indices", v.Layers)
		for i := int64(0); i < v.Layers; i++ {
			if idx[i] {
				v.Intermediate = append(v.Intermediate, i)
			}
		}
	} else {
		v.Intermediate = []int64{3, 7, 15, 23, 30}
	}
	keys := mllamaVisionKeys
	if !vc.has("attention_heads") {
		keys = withKey(keys, nn.FieldHeads, "num_attention_heads")
	}
	vc.checkLayer(v, keys)
	for _, e := range []*hfConfig{tc, vc} { // tc's hidden_size, read first, is the projector's width
		if e.err != nil && c.err == nil {
			c.err = e.err
		}
	}
	if c.err != nil {
		return nil
	}
	if tc.flag("tie_word_embeddings", false) {
		tc.fail("tie_word_embeddings", "is not modelled for Llama 3.2 Vision (embed_tokens has vocab_size + 8 rows, lm_head vocab_size)")
	}
	m := buildDecoder(tc, attn, head)
	if tc.err != nil || m == nil {
		c.err = tc.err
		return nil
	}
	layers := tc.size("num_hidden_layers")
	cross := map[int64]bool{}
	if tc.has("cross_attention_layers") {
		cross = tc.intList("cross_attention_layers", layers)
	} else {
		for _, i := range []int64{3, 8, 13, 18, 23, 28, 33, 38} { // MllamaTextConfig's default
			cross[i] = i < layers
		}
	}
	heads := tc.size("num_attention_heads")
	block := &nn.MllamaCrossBlock{Dim: hidden, Heads: heads, KVHeads: tc.kvHeads("num_key_value_heads", heads),
		HeadDim: hidden / heads, Inter: tc.size("intermediate_size"), Act: tc.mlpAct("hidden_act", "silu", true), Impl: attn}
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	embed, ok1 := m.Layers[0].(*nn.Embedding)
	stack, ok2 := m.Layers[1].(*core.Repeat)
	if !ok1 || !ok2 { // buildDecoder's llama layout: embed_tokens, layers, norm
		c.err = &units.Error{Msg: "mllama's text model was not built as embed_tokens, layers, norm", Hint: hintBug}
		return nil
	}
	embed.Rows += 8 // MllamaTextModel: nn.Embedding(vocab_size + 8, ...)
	blocks := stack.Blocks
	if blocks == nil {
		blocks = make([]core.Layer, stack.N)
		for i := range blocks {
			blocks[i] = stack.Layer
		}
	}
	for i := range blocks {
		if cross[int64(i)] {
			blocks[i] = block
		}
	}
	stack.Layer, stack.N, stack.Blocks = nil, 0, blocks
	m.Layers = []core.Layer{
		&core.Sequential{Name: "language_model", Layers: []core.Layer{embed}},
		v,
		&core.Sequential{Name: "language_model", Layers: m.Layers[1:]},
	}
	return m
}
