package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildQwen25VL builds transformers' Qwen2_5_VLForConditionalGeneration:
// the vision tower (vision_config; nn.VisionTower) whose image tokens join
// the text embeddings, then Qwen2's decoder (the top-level fields, as the
// hub's configs carry them), named model.visual and model.language_model.
// The multimodal rotary embedding (mrope) has Qwen2's memory.
func buildQwen25VL(c *hfConfig, attn string, head hfHead) *core.Model {
	return buildQwenVL(c, attn, head, qwen25Tower)
}

// buildQwen2VL builds Qwen2VLForConditionalGeneration (model_type
// qwen2_vl: Qwen2-VL-2B, 7B and 72B), Qwen2.5-VL's layout with Qwen2-VL's
// tower (nn.VisionTower.Qwen2VL).
func buildQwen2VL(c *hfConfig, attn string, head hfHead) *core.Model {
	return buildQwenVL(c, attn, head, qwen2Tower)
}

// qwen25Tower reads Qwen2_5_VLVisionConfig: window attention but in the
// blocks fullatt_block_indexes names. A config that leaves them out takes
// the class's defaults (configuration_qwen2_5_vl.py, 5.25.0): windows of
// 112 pixels, blocks 7, 15, 23 and 31 full (those the depth has; the
// forward tests layer_num in fullatt_block_indexes).
func qwen25Tower(vc *hfConfig, attn string) *nn.VisionTower {
	tower := &nn.VisionTower{Name: "visual", Dim: vc.size("hidden_size"), Depth: vc.size("depth"), Heads: vc.size("num_heads"),
		Inter: vc.size("intermediate_size"), Patch: vc.sizeOr("patch_size", 14), Temporal: vc.sizeOr("temporal_patch_size", 2),
		InChans: vc.sizeOr("in_chans", vc.sizeOr("in_channels", 3)), Merge: vc.sizeOr("spatial_merge_size", 2),
		TextDim: vc.size("out_hidden_size"), Window: vc.intOr("window_size", 112), Impl: attn}
	full := map[int64]bool{7: true, 15: true, 23: true, 31: true}
	if vc.has("fullatt_block_indexes") {
		full = vc.intList("fullatt_block_indexes", tower.Depth)
	}
	for i := int64(0); i < tower.Depth; i++ {
		if full[i] {
			tower.FullBlocks = append(tower.FullBlocks, i)
		}
	}
	keys := visionTowerKeys
	if !vc.has("in_chans") {
		keys = withKey(keys, nn.FieldInChans, "in_channels")
	}
	vc.checkLayer(tower, keys)
	return tower
}

// qwen2Tower reads Qwen2VLVisionConfig (configuration_qwen2_vl.py,
// 5.25.0): the tower embed_dim wide with MLPs of int(embed_dim *
// mlp_ratio) (default 4) and hidden_act (default quick_gelu), hidden_size
// the language model's width; the hub's configs spell in_channels
// in_chans, which the class does not read (its default 3 stands).
func qwen2Tower(vc *hfConfig, attn string) *nn.VisionTower {
	dim := vc.size("embed_dim")
	ratio := vc.number("mlp_ratio", 4)
	if vc.err == nil && !(ratio > 0 && float64(dim)*ratio <= maxHFDim) {
		vc.fail("mlp_ratio", "must be a positive number that keeps embed_dim x mlp_ratio at most %d (got %g)", maxHFDim, ratio)
	}
	if vc.err == nil && float64(dim)*ratio < 1 {
		vc.fail("mlp_ratio", "(%g) x embed_dim (%d) is under one: the MLP would have no hidden unit (int(embed_dim * mlp_ratio))", ratio, dim)
	}
	tower := &nn.VisionTower{Name: "visual", Dim: dim, Depth: vc.size("depth"), Heads: vc.size("num_heads"),
		Inter: int64(float64(dim) * ratio), Patch: vc.sizeOr("patch_size", 14), Temporal: vc.sizeOr("temporal_patch_size", 2),
		InChans: vc.sizeOr("in_channels", 3), Merge: vc.sizeOr("spatial_merge_size", 2), TextDim: vc.size("hidden_size"),
		Impl: attn, Qwen2VL: true, Act: vc.mlpAct("hidden_act", "quick_gelu", false)}
	keys := withKey(withKey(withKey(visionTowerKeys, nn.FieldDim, "embed_dim"), nn.FieldHidden, "mlp_ratio"), nn.FieldInChans, "in_channels")
	vc.checkLayer(tower, keys)
	return tower
}

// buildQwenVL builds a Qwen-VL model whose tower readTower reads from
// vision_config.
func buildQwenVL(c *hfConfig, attn string, head hfHead, readTower func(vc *hfConfig, attn string) *nn.VisionTower) *core.Model {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	tower := readTower(vc, attn)
	if vc.err != nil {
		c.err = vc.err
		return nil
	}
	mt := c.modelType
	lm := c.textConfig()
	lm.classKeys(mt + "_text") // Qwen2VLTextConfig's or Qwen2_5_VLTextConfig's defaults
	lm.modelType = "qwen2"     // the language model
	lm.mrope = true
	m := buildDecoder(lm, attn, head)
	c.err = lm.err
	c.modelType = mt
	if m == nil {
		return nil
	}
	top := c
	c = lm
	if hidden := c.size("hidden_size"); c.err == nil && tower.TextDim != hidden {
		key := "out_hidden_size"
		if tower.Qwen2VL {
			key = "hidden_size"
		}
		c.fail("vision_config", "%s (%d) must be the language model's hidden_size (%d)", key, tower.TextDim, hidden)
		top.err = c.err // c is the language model's config here: a nil model needs its error
		return nil
	}
	// embed_tokens, the decoder stack, the norm
	embed, rest := m.Layers[0], m.Layers[1:]
	m.Layers = []core.Layer{
		&core.Sequential{Name: "language_model", Layers: []core.Layer{embed}},
		tower,
		&core.Sequential{Name: "language_model", Layers: rest},
	}
	return m
}

// textConfig is the language model's config: the top-level fields, as the
// hub's configs carry them, with text_config's over them when present
// (transformers 5 saves Qwen2_5_VLConfig's text fields in text_config
// only: 5.17.0's save_pretrained of qwen2.5-vl-3b-instruct.json has no
// top-level hidden_size).
func (c *hfConfig) textConfig() *hfConfig {
	tc, ok := c.raw["text_config"].(map[string]any)
	if !ok {
		return &hfConfig{raw: c.raw, modelType: c.modelType, name: c.name, mtp: c.mtp, err: c.err}
	}
	raw := make(map[string]any, len(c.raw)+len(tc))
	for k, v := range c.raw {
		raw[k] = v
	}
	for k, v := range tc {
		if k != "model_type" {
			raw[k] = v
		}
	}
	return &hfConfig{raw: raw, modelType: c.modelType, name: c.name, mtp: c.mtp, err: c.err}
}

// towerAfter puts a vision tower after the text model's first n layers
// (its embeddings: the image tokens replace placeholders among them), the
// text model's two parts named language_model, as the vision-language
// models' module trees name their text model.
func towerAfter(m *core.Model, n int, tower core.Layer) {
	towerAfterAs(m, n, tower, "language_model")
}

// towerAfterAs is towerAfter with the text model named name (Idefics3's
// text_model).
func towerAfterAs(m *core.Model, n int, tower core.Layer, name string) {
	m.Layers = []core.Layer{
		&core.Sequential{Name: name, Layers: m.Layers[:n]},
		tower,
		&core.Sequential{Name: name, Layers: m.Layers[n:]},
	}
}

// decoderWithTower builds text_config's decoder (tc, whose model_type the
// caller has checked) with the vision tower tower builds after its
// embeddings (Mistral 3's Pixtral, InternVL's InternViT). The head is
// tied when both the top level (default true) and text_config (default
// false) say so: what from_pretrained loads from checkpoints that store
// lm_head apart (mistral3.go).
func decoderWithTower(c, tc *hfConfig, attn string, head hfHead, tower func() core.Layer) *core.Model {
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m := buildDecoder(tc, attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	m.TieEmbeddings = m.Vocab > 0 && c.flag("tie_word_embeddings", true) && tc.flag("tie_word_embeddings", false)
	v := tower()
	if c.err != nil {
		return nil
	}
	towerAfter(m, 1, v)
	return m
}
