package hf

import (
	"encoding/json"
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGLM4V builds transformers' Glm4vForConditionalGeneration (model_type
// glm4v: GLM-4.1V-9B-Thinking, GLM-4.6V-Flash) and
// Glm4vMoeForConditionalGeneration (glm4v_moe: GLM-4.5V, GLM-4.6V;
// models/glm4v, models/glm4v_moe at 5.25.0): the vision tower
// (vision_config; nn.Glm4vVisionTower) whose image tokens join the text
// embeddings, then the language model (text_config: transformers 5 reads
// no top-level text field, and without text_config would build the
// class's defaults, so memsh asks for it), named model.visual and
// model.language_model.
//
// glm4v's language model is GLM-4's decoder (buildGLM4: Glm4vTextDecoderLayer
// norms each sublayer's input and output, Glm4vTextMLP is one
// gate_up_proj) whose attention always biases q, k and v
// (Glm4vTextAttention: bias=True, whatever attention_bias says) and takes
// head_dim = hidden_size / num_attention_heads (it reads no head_dim).
// glm4v_moe's is GLM-4.5-Air's (buildGLM4MoE) without the per-head q/k
// norms (Glm4vMoeTextAttention is Glm4Attention: Glm4vMoeTextConfig
// removes use_qk_norm). Both make their multimodal rotary pair once a
// forward (Glm4vTextRotaryEmbedding recombines the mrope sections and
// repeat_interleaves them in rotary_emb; Glm4vMoeTextRotaryEmbedding
// cats them): cos and sin of [batch, seq, head_dim x
// partial_rotary_factor] in the hidden states' dtype, which every layer's
// rope saves (nn.Attention.RopeTablesBatch), where glm4's text model
// makes a new pair in every layer.
func buildGLM4V(c *hfConfig, attn string, head hfHead) *core.Model {
	tower := glm4vTower(c, attn)
	if c.err != nil {
		return nil
	}
	lm := c.sub("text_config") // its keys named by their path: "text_config.hidden_size"
	if c.err != nil {
		return nil
	}
	lm.raw = cloneRaw(lm.raw)
	lm.mrope, lm.mtp = true, c.mtp
	// Glm4vConfig ties the head when it or text_config says so
	// (tie_word_embeddings, default false, in either).
	lm.raw["tie_word_embeddings"] = c.flag("tie_word_embeddings", false) || lm.flag("tie_word_embeddings", false)
	var m *core.Model
	if c.modelType == "glm4v_moe" {
		lm.classKeys("glm4v_moe_text") // Glm4vMoeTextConfig's names and defaults
		lm.modelType = "glm4_moe"
		lm.raw["use_qk_norm"] = false
		glm4vRope(lm, 0.5, lm.headDim("hidden_size", "num_attention_heads", 0))
		m = buildGLM4MoE(lm, attn, head)
	} else {
		lm.classKeys("glm4v_text") // Glm4vTextConfig's defaults
		lm.modelType = "glm4"
		hidden, heads := lm.size("hidden_size"), lm.size("num_attention_heads")
		if lm.err == nil && heads > 0 {
			lm.raw["head_dim"] = json.Number(core.Itoa(hidden / heads))
			glm4vRope(lm, 1, hidden/heads)
		}
		lm.raw["attention_bias"] = true
		m = buildGLM4(lm, attn, head)
	}
	c.err = lm.err
	if m == nil || c.err != nil {
		return nil
	}
	if hidden := lm.size("hidden_size"); tower.TextDim != hidden {
		c.fail("vision_config", "out_hidden_size (%d) must be the language model's hidden_size (%d)", tower.TextDim, hidden)
		return nil
	}
	m.Name = c.name
	towerAfter(m, 1, tower)
	return m
}

// glm4vTower reads vision_config (Glm4vVisionConfig, whose defaults are
// GLM-4.1V's tower): the blocks' MLPs are out_hidden_size wide
// (Glm4VisionMlp), the merger's intermediate_size; the position table has
// (image_size // patch_size)² rows.
func glm4vTower(c *hfConfig, attn string) *nn.Glm4vVisionTower {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	patch, image := vc.sizeOr("patch_size", 14), vc.sizeOr("image_size", 336)
	var side int64
	if vc.err == nil {
		side = image / patch
		if side == 0 {
			vc.fail("image_size", "(%d) is less than patch_size (%d): the position table would have no row", image, patch)
		}
	}
	t := &nn.Glm4vVisionTower{Name: "visual", Dim: vc.sizeOr("hidden_size", 1536), Depth: vc.sizeOr("depth", 24),
		Heads: vc.sizeOr("num_heads", 12), Inter: vc.sizeOr("intermediate_size", 13696), Act: vc.mlpAct("hidden_act", "silu", true),
		Patch: patch, Temporal: vc.sizeOr("temporal_patch_size", 2), InChans: vc.sizeOr("in_channels", 3),
		Merge: vc.sizeOr("spatial_merge_size", 2), TextDim: vc.sizeOr("out_hidden_size", 4096), Positions: side * side,
		AttnBias: vc.flag("attention_bias", false), Impl: attn}
	vc.checkLayer(t, glm4vTowerKeys)
	if vc.err != nil {
		c.err = vc.err
		return nil
	}
	return t
}

// glm4vRope reads the language model's rotary embedding as
// Glm4vTextRotaryEmbedding does: partial_rotary_factor from the config or
// its rope_parameters (default def: Glm4vTextConfig sets none, so the
// default rope's 1.0; Glm4vMoeTextConfig inherits GLM-4.5's 0.5), and
// mrope_section (rope_parameters' or rope_scaling's; default 8, 12, 12),
// whose sections split the head_dim x factor / 2 frequencies
// (freq.split(mrope_section)): they must add up to them.
func glm4vRope(lm *hfConfig, def float64, hd int64) {
	rope, _ := lm.raw["rope_parameters"].(map[string]any)
	if rope == nil {
		rope, _ = lm.raw["rope_scaling"].(map[string]any)
	}
	if !lm.has("partial_rotary_factor") {
		f := json.Number(fmt.Sprint(def))
		if n, ok := rope["partial_rotary_factor"].(json.Number); ok {
			f = n
		}
		lm.raw["partial_rotary_factor"] = f
	}
	rotary := ropeWidth(hd, lm.rotaryFactor("partial_rotary_factor", def))
	key := "rope_scaling.mrope_section"
	if _, ok := lm.raw["rope_parameters"].(map[string]any); ok {
		key = "rope_parameters.mrope_section"
	}
	sections, sum := []any{json.Number("8"), json.Number("12"), json.Number("12")}, int64(0)
	if list, ok := rope["mrope_section"].([]any); ok {
		sections = list
	}
	for _, v := range sections {
		num, ok := v.(json.Number)
		n, err := num.Int64()
		if !ok || err != nil || n < 0 {
			lm.fail(key, "must list whole numbers of frequencies (got %s)", describeJSON(v))
			return
		}
		sum += n
	}
	if lm.err == nil && 2*sum != rotary {
		lm.fail(key, "adds up to %d frequencies; the rotary embedding has %d (head_dim %d x partial_rotary_factor, halved)", sum, rotary/2, hd)
	}
}

// cloneRaw is a copy of raw, which a builder may write into without
// changing the config it came from.
func cloneRaw(raw map[string]any) map[string]any {
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		out[k] = v
	}
	return out
}
