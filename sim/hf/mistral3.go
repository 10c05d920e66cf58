package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMistral3 builds transformers' Mistral3ForConditionalGeneration
// (model_type mistral3: Mistral Small 3.1 and 3.2, and the Magistral and
// Devstral checkpoints that ship the class; models/mistral3, first in the
// 4.50.0 wheel; mosaicml/llm-foundry PR #1789 moved to 4.50.0 "for the
// usage of gemma3 and mistral3 models"): text_config's decoder
// (buildDecoder) named model.language_model, with lm_head beside it:
// Mistral's, or Ministral 3's (model_type ministral3: Mistral's layers
// with q scaled by position after the rotation, nn.Attention.QPosScale); Pixtral's vision tower and
// the projector (model.vision_tower, model.multi_modal_projector;
// nn.PixtralVision) between the text embeddings and the decoder layers.
//
// The head: Mistral3Config's own tie_word_embeddings defaults to True
// (transformers PR #43429, for Ministral 3, whose checkpoints store no
// lm_head), so from_config on a Mistral Small config.json, which states
// only text_config's false, ties it; from_pretrained of the checkpoint,
// which stores lm_head.weight apart, does not (PreTrainedModel.tie_weights
// leaves two differing stored weights untied, modeling_utils.py,
// 5.25.0). memsh counts what from_pretrained loads: the head is tied when
// both the top level (default true) and text_config (MistralConfig's
// default false) say so.
func buildMistral3(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	tc.modelType = tc.str("model_type", "mistral")
	tc.classKeys(tc.modelType) // MistralConfig's or Ministral3Config's defaults
	switch tc.modelType {
	case "mistral":
	case "ministral3":
		// Ministral3Attention scales q by rope_parameters'
		// llama_4_scaling_beta (Ministral3Config's default rope_parameters
		// set it; a file's own must too: transformers reads it unchecked)
		if rp, ok := tc.raw["rope_parameters"].(map[string]any); ok && rp["llama_4_scaling_beta"] == nil {
			tc.fail("rope_parameters", "has no llama_4_scaling_beta, which Ministral3Attention scales q by")
		}
	default:
		tc.fail("model_type", "must be \"mistral\" (Mistral Small 3.1, 3.2) or \"ministral3\" (Ministral 3) (got %q)", tc.modelType)
	}
	return decoderWithTower(c, tc, attn, head, func() core.Layer { return pixtralVision(c, tc, attn, false) })
}

// pixtralVisionKeys name PixtralVision's checked inputs by vision_config's
// keys, pixtralMergeKeys by the top object's (the projection's width is
// text_config's hidden_size: textWidthKeys).
var (
	pixtralVisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size", nn.FieldDepth: "num_hidden_layers",
		nn.FieldInChans: "num_channels", nn.FieldPatch: "patch_size", nn.FieldImage: "image_size",
	}
	pixtralMergeKeys = map[nn.Field]string{nn.FieldMerge: "spatial_merge_size"}
)

// pixtralVision reads vision_config at PixtralVisionConfig's defaults
// (configuration_pixtral.py, 5.25.0: 24 layers of 1024, 16 heads, 4096
// wide MLPs with gelu, patches of 16, images of 1024, 3 channels) and
// the top level's projector_hidden_act (gelu) and
// multimodal_projector_bias: Mistral3Config's (false, with
// spatial_merge_size, 2), or with llava LlavaConfig's (true; LLaVA's
// projector merges nothing, and PixtralProcessor's spatial_merge_size
// defaults to 1, processing_pixtral.py). vision_config's head_dim is not
// read (PixtralVisionConfig sets hidden_size / num_attention_heads);
// vision_feature_layer must be -1, the last layer's features, as in every
// Mistral 3 checkpoint and mistral-community/pixtral-12b (LlavaConfig's
// default, -2, must be overridden so).
func pixtralVision(c, tc *hfConfig, attn string, llava bool) *nn.PixtralVision {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	if mt := vc.str("model_type", "pixtral"); mt != "pixtral" {
		vc.fail("model_type", "must be Pixtral's, \"pixtral\" (got %q)", mt)
	}
	merge, family := int64(1), "mistral-community/pixtral-12b"
	if !llava {
		merge, family = c.sizeOr("spatial_merge_size", 2), "every Mistral 3 checkpoint"
	}
	v := &nn.PixtralVision{Dim: vc.sizeOr("hidden_size", 1024), Layers: vc.sizeOr("num_hidden_layers", 24), Heads: vc.sizeOr("num_attention_heads", 16),
		Inter: vc.sizeOr("intermediate_size", 4096), Act: vc.mlpAct("hidden_act", "gelu", true), Image: vc.sizeOr("image_size", 1024),
		Patch: vc.sizeOr("patch_size", 16), Channels: vc.sizeOr("num_channels", 3), Merge: merge,
		TextDim: tc.size("hidden_size"), ProjAct: c.mlpAct("projector_hidden_act", "gelu", false),
		ProjBias: c.flag("multimodal_projector_bias", llava), Llava: llava, Impl: attn}
	if p := vc.prob("attention_dropout", 0); p > 0 {
		vc.fail("attention_dropout", "is %g: dropout in the vision attention is not modelled (%s uses 0.0)", p, family)
	}
	switch n, ok := c.raw["vision_feature_layer"].(json.Number); {
	case !c.has("vision_feature_layer") && llava:
		c.fail("vision_feature_layer", "is LlavaConfig's default, -2: memsh models a Pixtral tower's last layer's features only (-1, %s's)", family)
	case c.has("vision_feature_layer") && (!ok || n.String() != "-1"):
		c.fail("vision_feature_layer", "is %s: memsh models the last layer's features only (-1, %s's)", describeJSON(c.raw["vision_feature_layer"]), family)
	}
	if s := c.str("vision_feature_select_strategy", "default"); llava && s != "full" {
		// LlavaModel.get_image_features drops the first patch under "default"
		// ([:, 1:]): Pixtral has no class token, and the split by image_sizes fails
		c.fail("vision_feature_select_strategy", "is %q: a Pixtral tower has no class token to drop; LLaVA with Pixtral needs \"full\" (%s's)", s, family)
	}
	if c.err = firstErr(c, vc, tc); c.err != nil {
		return nil
	}
	keys := []objectKeys{{vc, pixtralVisionKeys}, {tc, textWidthKeys}}
	if !llava {
		keys = append(keys, objectKeys{c, pixtralMergeKeys})
	}
	c.checkLayer(v, pathKeys(keys...))
	if c.err != nil {
		return nil
	}
	return v
}
