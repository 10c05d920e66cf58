package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildQwen3VL builds transformers' Qwen3VLForConditionalGeneration and
// Qwen3VLMoeForConditionalGeneration (modeling_qwen3_vl.py,
// modeling_qwen3_vl_moe.py): the vision tower (vision_config;
// nn.Qwen3VisionTower) whose image tokens join the text embeddings and
// whose deepstack features are added after the first decoder layers
// (nn.DeepstackAdd), then Qwen3's decoder or Qwen3-MoE's (text_config),
// named model.visual and model.language_model. The interleaved
// multimodal rotary embedding (mrope_section, mrope_interleaved) has
// Qwen3's memory: cos and sin of [batch, seq, head_dim] once a step.
func buildQwen3VL(c *hfConfig, attn string, head hfHead) *core.Model {
	moe := c.modelType == "qwen3_vl_moe"
	tower := qwen3VisionTower(c, attn, true)
	if c.err != nil {
		return nil
	}
	lm := c.sub("text_config") // its keys named by their path: "text_config.hidden_size"
	if c.err != nil {
		return nil
	}
	lm.classKeys(c.modelType + "_text") // Qwen3VLTextConfig's or Qwen3VLMoeTextConfig's defaults
	lm.modelType, lm.mtp = "qwen3", c.mtp
	// the model's own config ties the head (PreTrainedModel.tie_weights
	// reads self.config: Qwen3VLConfig.tie_word_embeddings, default False)
	lm.raw["tie_word_embeddings"] = c.flag("tie_word_embeddings", false)
	if moe {
		lm.modelType = "qwen3_moe"
		// Qwen3VLMoeTextTopKRouter always renormalises its top-k weights
		// (no norm_topk_prob in Qwen3VLMoeTextConfig); head_dim defaults
		// to hidden_size / num_attention_heads, as Qwen3MoeConfig's.
		lm.raw["norm_topk_prob"] = true
	}
	lm.mrope = true
	return c.joinVision(lm, tower, buildDecoder(lm, attn, head))
}

// buildQwen35VL is Qwen3_5ForConditionalGeneration and
// Qwen3_5MoeForConditionalGeneration (modeling_qwen3_5.py,
// modeling_qwen3_5_moe.py at 5.17.0): Qwen3-VL's vision tower without
// DeepStack (Qwen3_5VisionModel has no deepstack_merger_list) before
// Qwen3.5's text model.
func buildQwen35VL(c *hfConfig, attn string, head hfHead) *core.Model {
	tower := qwen3VisionTower(c, attn, false)
	if c.err != nil {
		return nil
	}
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	tc.modelType, tc.mtp, tc.mrope = c.modelType+"_text", c.mtp, true
	tc.classKeys(tc.modelType) // Qwen3_5TextConfig's or Qwen3_5MoeTextConfig's defaults
	tc.raw = cloneRaw(tc.raw)
	// the model's own config ties the head (PreTrainedModel.tie_weights
	// reads self.config: Qwen3_5Config.tie_word_embeddings, default False)
	tc.raw["tie_word_embeddings"] = c.flag("tie_word_embeddings", false)
	return c.joinVision(tc, tower, buildQwen35(tc, attn, head))
}

// qwen3VisionTower reads vision_config; deepstack reads its
// deepstack_visual_indexes (Qwen3VLVisionConfig's default 8, 16, 24).
func qwen3VisionTower(c *hfConfig, attn string, deepstack bool) *nn.Qwen3VisionTower {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	t := &nn.Qwen3VisionTower{Name: "visual", Dim: vc.size("hidden_size"), Depth: vc.size("depth"), Heads: vc.size("num_heads"),
		Inter: vc.size("intermediate_size"), Act: vc.mlpAct("hidden_act", "gelu_pytorch_tanh", false),
		Patch: vc.sizeOr("patch_size", 16), Temporal: vc.sizeOr("temporal_patch_size", 2), InChans: vc.sizeOr("in_channels", 3),
		Merge: vc.sizeOr("spatial_merge_size", 2), TextDim: vc.size("out_hidden_size"),
		Positions: vc.sizeOr("num_position_embeddings", 2304), Impl: attn}
	if deepstack {
		t.Deepstack = vc.orderedInts("deepstack_visual_indexes", []int64{8, 16, 24})
		if !vc.has("deepstack_visual_indexes") && vc.err == nil && t.Depth <= 24 {
			vc.fail("deepstack_visual_indexes", "is missing, and Qwen3VLVisionConfig's default (8, 16, 24) names blocks past the tower's depth (%d)", t.Depth)
		}
	}
	vc.checkLayer(t, qwen3VisionTowerKeys)
	if vc.err != nil {
		c.err = vc.err
		return nil
	}
	return t
}

// joinVision puts the tower between the language model m's embeddings
// (built from lm) and its layers, with a DeepstackAdd after each of the
// first len(tower.Deepstack) decoder layers.
func (c *hfConfig) joinVision(lm *hfConfig, tower *nn.Qwen3VisionTower, m *core.Model) *core.Model {
	c.err = lm.err
	if m == nil || c.err != nil {
		return nil
	}
	if hidden := lm.size("hidden_size"); lm.err == nil && tower.TextDim != hidden {
		c.fail("vision_config", "out_hidden_size (%d) must be the language model's hidden_size (%d)", tower.TextDim, hidden)
		return nil
	}
	embed, rest := m.Layers[0], m.Layers[1:]
	if k := len(tower.Deepstack); k > 0 {
		r, ok := rest[0].(*core.Repeat)
		if !ok || int64(k) > r.Count() {
			layers := lm.sizeOr("num_hidden_layers", 0)
			c.fail("vision_config.deepstack_visual_indexes", "lists %d features, more than the language model's layers (%q: %d)", k, lm.at("num_hidden_layers"), layers)
			return nil
		}
		blocks := make([]core.Layer, r.Count())
		for i := range blocks {
			blocks[i] = r.Block(int64(i))
			if i < k {
				blocks[i] = &core.Sequential{Layers: []core.Layer{blocks[i], &nn.DeepstackAdd{Index: i}}}
			}
		}
		rest = append([]core.Layer{&core.Repeat{Name: r.Name, Blocks: blocks}}, rest[1:]...)
		rest = append(rest, &nn.DeepstackEnd{})
	}
	m.Layers = []core.Layer{
		&core.Sequential{Name: "language_model", Layers: []core.Layer{embed}},
		tower,
		&core.Sequential{Name: "language_model", Layers: rest},
	}
	return m
}

// orderedInts reads an optional list of integers in order (def when
// absent).
func (c *hfConfig) orderedInts(key string, def []int64) []int64 {
	if !c.has(key) {
		return def
	}
	list, ok := c.raw[key].([]any)
	if !ok {
		c.fail(key, "must be a list of block indices (got %s)", describeJSON(c.raw[key]))
		return nil
	}
	out := make([]int64, 0, len(list))
	for _, v := range list {
		num, ok := v.(json.Number)
		i, err := num.Int64()
		if !ok || err != nil {
			c.fail(key, "must be a list of block indices (got %s)", describeJSON(v))
			return nil
		}
		out = append(out, i)
	}
	return out
}
