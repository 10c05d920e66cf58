package hf

import (
	"encoding/json"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildInternVL builds transformers' InternVLForConditionalGeneration
// (model_type internvl: the "-hf" checkpoints of InternVL3 and
// InternVL3.5; models/internvl, first in the 4.52.0 wheel):
// text_config's decoder (buildDecoder: Qwen2 for InternVL3, Qwen3 for
// InternVL3.5) named model.language_model, with lm_head beside it;
// InternViT and the projector (model.vision_tower,
// model.multi_modal_projector; nn.InternVLVision) between the text
// embeddings and the decoder layers.
//
// The head: InternVLConfig's tie_word_embeddings defaults to True, the
// text configs' (Qwen2Config, Qwen3Config) to False; as for Mistral 3
// memsh counts what from_pretrained loads (decoderWithTower): the head is
// tied when both the top level and text_config say so.
func buildInternVL(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	tc.modelType = tc.str("model_type", "qwen2")
	tc.classKeys(tc.modelType) // Qwen2Config's defaults
	switch tc.modelType {
	case "qwen2", "qwen3":
	default:
		tc.fail("model_type", "must be \"qwen2\" (InternVL3) or \"qwen3\" (InternVL3.5) (got %q)", tc.modelType)
	}
	return decoderWithTower(c, tc, attn, head, func() core.Layer { return internVLVision(c, tc, attn) })
}

// internVLVisionKeys name InternVLVision's checked inputs by
// vision_config's keys, internVLMergeKeys by the top object's (the
// projection's width is text_config's hidden_size: textWidthKeys).
var (
	internVLVisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size", nn.FieldDepth: "num_hidden_layers",
		nn.FieldInChans: "num_channels", nn.FieldPatch: "patch_size", nn.FieldImage: "image_size",
	}
	internVLMergeKeys = map[nn.Field]string{nn.FieldShuffle: "downsample_ratio"}
)

// internVLMaxTiles is GotOcr2ImageProcessor's max_patches default, the
// most tiles of an image (InternVL's preprocessor configs keep 12); memsh
// reads no preprocessor_config.json.
const internVLMaxTiles = 12

// internVLVision reads vision_config at InternVLVisionConfig's defaults
// (configuration_internvl.py, 5.25.0: InternViT-300M, 24 layers of 1024,
// 16 heads, 4096 wide MLPs with gelu, tiles of 448, patches of 14,
// layer_norm, no attention bias, no qk norm, mean pooling; InternViT-6B
// sets rms_norm and use_qk_norm: nn.InternVLVision.QKNorm) and the top
// level's downsample_ratio (0.5) and projector_hidden_act (gelu).
// vision_feature_layer must be -1 and vision_feature_select_strategy
// "default" (the cls dropped), as in every InternVL checkpoint.
func internVLVision(c, tc *hfConfig, attn string) *nn.InternVLVision {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	if mt := vc.str("model_type", "internvl_vision"); mt != "internvl_vision" {
		vc.fail("model_type", "must be InternViT's, \"internvl_vision\" (got %q)", mt)
	}
	v := &nn.InternVLVision{Dim: vc.sizeOr("hidden_size", 1024), Layers: vc.sizeOr("num_hidden_layers", 24), Heads: vc.sizeOr("num_attention_heads", 16),
		Inter: vc.sizeOr("intermediate_size", 4096), Act: vc.mlpAct("hidden_act", "gelu", false), SquareTile: nn.SquareTile{Image: vc.squareSize("image_size", 448),
			Patch: vc.squareSize("patch_size", 14), Channels: vc.sizeOr("num_channels", 3)}, AttnBias: vc.flag("attention_bias", false),
		QKNorm: vc.flag("use_qk_norm", false), MeanPooling: vc.flag("use_mean_pooling", true), Merge: c.internVLMerge(), MaxTiles: internVLMaxTiles,
		TextDim: tc.size("hidden_size"), ProjAct: c.mlpAct("projector_hidden_act", "gelu", false), Impl: attn}
	switch nt := vc.str("norm_type", "layer_norm"); nt {
	case "layer_norm":
	case "rms_norm":
		v.RMS = true
	default:
		vc.fail("norm_type", "must be \"layer_norm\" or \"rms_norm\" (got %q)", nt)
	}
	if vc.flag("use_mask_token", false) {
		vc.fail("use_mask_token", "is true: the masked-image-modelling token is not modelled (InternVL's checkpoints have none)")
	}
	if !vc.flag("use_absolute_position_embeddings", true) {
		vc.fail("use_absolute_position_embeddings", "is false: memsh models InternViT with its learned position embeddings (every InternVL checkpoint's)")
	}
	for _, k := range []string{"attention_dropout", "projection_dropout", "hidden_dropout_prob"} {
		if p := vc.prob(k, 0); p > 0 {
			vc.fail(k, "is %g: dropout in the vision tower is not modelled (InternVL uses 0.0)", p)
		}
	}
	if c.has("vision_feature_layer") {
		if n, ok := c.raw["vision_feature_layer"].(json.Number); !ok || n.String() != "-1" {
			c.fail("vision_feature_layer", "is %s: memsh models the last layer's features only (-1, every InternVL checkpoint's)", describeJSON(c.raw["vision_feature_layer"]))
		}
	}
	if s := c.str("vision_feature_select_strategy", "default"); s != "default" {
		c.fail("vision_feature_select_strategy", "is %q: memsh models \"default\" (the cls token dropped, every InternVL checkpoint's)", s)
	}
	if c.err = firstErr(c, vc, tc); c.err != nil {
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, internVLVisionKeys}, objectKeys{c, internVLMergeKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	return v
}

// internVLMerge is int(1 / downsample_ratio), the patches a side
// pixel_shuffle merges; the projector's width (vision hidden_size x
// int(1 / r)²) matches pixel_shuffle's channels only when 1 / r is whole.
func (c *hfConfig) internVLMerge() int64 {
	r := c.number("downsample_ratio", 0.5)
	if c.err != nil {
		return 0
	}
	k := 1 / r
	if !(r > 0 && r <= 1) || k != math.Trunc(k) || k > 64 {
		c.fail("downsample_ratio", "is %g; memsh models 1/k for a whole k (InternVL's 0.5: each token merges 2 x 2 patches)", r)
		return 0
	}
	return int64(k)
}

// squareSize reads a side in pixels that InternVLVisionConfig takes as
// one integer or as [height, width] (the "-hf" configs write [448, 448]);
// memsh models square tiles and patches.
func (c *hfConfig) squareSize(key string, def int64) int64 {
	l, ok := c.raw[key].([]any)
	if !ok {
		return c.sizeOr(key, def)
	}
	if len(l) != 2 {
		c.fail(key, "has %d entries; want one size or [height, width]", len(l))
		return 0
	}
	side := func(v any) int64 {
		one := &hfConfig{raw: map[string]any{key: v}, modelType: c.modelType, prefix: c.prefix}
		n := one.size(key)
		if c.err == nil {
			c.err = one.err
		}
		return n
	}
	h, w := side(l[0]), side(l[1])
	if c.err == nil && h != w {
		c.fail(key, "is [%d, %d]: memsh models square sizes (InternVL's [448, 448] tiles, [14, 14] patches)", h, w)
	}
	if c.err != nil {
		return 0
	}
	return h
}
