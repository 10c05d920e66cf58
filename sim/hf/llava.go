package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildLlava builds transformers' LlavaForConditionalGeneration
// (model_type llava: llava-hf/llava-1.5-7b-hf and 13b, and the
// fine-tunes made from them; models/llava/modeling_llava.py, 5.25.0):
// text_config's decoder (llama, mistral or qwen2: buildDecoder) named
// model.language_model, with lm_head beside it (tied when either
// tie_word_embeddings says so, the top level's (LlavaConfig's default
// false) or text_config's: LlavaConfig takes text_config's true, and
// from_config on the meta device ties either way, 5.25.0); the
// CLIP vision tower and the projector (model.vision_tower,
// model.multi_modal_projector; nn.LlavaVision) between the text
// embeddings and the decoder layers; or with a Pixtral vision_config
// (mistral-community/pixtral-12b: model_type "pixtral"), Pixtral's tower
// with LLaVA's projector (nn.PixtralVision with Llava; pixtralVision).
func buildLlava(c *hfConfig, attn string, head hfHead) *core.Model {
	return llavaModel(c, attn, head, "llama", true, func(tc *hfConfig) core.Layer {
		if vc, _ := c.raw["vision_config"].(map[string]any); vc != nil && vc["model_type"] == "pixtral" {
			return pixtralVision(c, tc, attn, true)
		}
		return llavaVision(c, tc, attn, llavaDefaultVision, nil)
	})
}

// llavaModel builds text_config's decoder (model_type text by default:
// llama, mistral or qwen2) named model.language_model, lm_head beside it,
// with the tower vision builds between its embeddings and its layers. The
// head is tied when the top level's tie_word_embeddings says so (default
// false), or with eitherTie text_config's too (LlavaConfig and
// LlavaOnevisionConfig take text_config's true; LlavaNextConfig does not,
// transformers 5.25.0, checked on the meta device).
func llavaModel(c *hfConfig, attn string, head hfHead, text string, eitherTie bool, vision func(tc *hfConfig) core.Layer) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	tc.modelType = tc.str("model_type", text)
	switch tc.modelType {
	case "llama", "mistral", "qwen2":
	default:
		tc.fail("model_type", "must be \"llama\" (llava-1.5, LLaVA-NeXT's Vicuna and Llama 3), \"mistral\" or \"qwen2\" (got %q)", tc.modelType)
	}
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	tc.withDefaults(llavaTextDefaults[tc.modelType])
	m := buildDecoder(tc, attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	m.TieEmbeddings = m.Vocab > 0 && (c.flag("tie_word_embeddings", false) || eitherTie && tc.flag("tie_word_embeddings", false))
	v := vision(tc)
	if c.err != nil {
		return nil
	}
	towerAfter(m, 1, v)
	return m
}

// llavaTextDefaults are the text configs' defaults for the sizes
// llava's config.json files leave out of text_config (llava-1.5-7b states
// only vocab_size, max_position_embeddings and rms_norm_eps): LlamaConfig's,
// MistralConfig's and Qwen2Config's (configuration_llama.py,
// configuration_mistral.py, configuration_qwen2.py, transformers 5.25.0).
var llavaTextDefaults = map[string]map[string]json.Number{
	"llama": {"vocab_size": "32000", "hidden_size": "4096", "intermediate_size": "11008", "num_hidden_layers": "32", "num_attention_heads": "32"},
	"mistral": {"vocab_size": "32000", "hidden_size": "4096", "intermediate_size": "14336", "num_hidden_layers": "32", "num_attention_heads": "32",
		"num_key_value_heads": "8"},
	"qwen2": {"vocab_size": "151936", "hidden_size": "4096", "intermediate_size": "22016", "num_hidden_layers": "32", "num_attention_heads": "32",
		"num_key_value_heads": "32"},
}

// llavaVisionKeys name LlavaVision's checked inputs by vision_config's
// keys, llavaFeatureKeys by the top object's (the projection's width is
// text_config's hidden_size: textWidthKeys).
var (
	llavaVisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size", nn.FieldDepth: "num_hidden_layers",
		nn.FieldInChans: "num_channels", nn.FieldPatch: "patch_size", nn.FieldImage: "image_size",
	}
	llavaFeatureKeys = map[nn.Field]string{nn.FieldFeatureLayer: "vision_feature_layer"}
)

// llavaDefaultVision is the vision_config LlavaConfig makes when the file
// has none (sub_configs_defaults in configuration_llava.py, 5.25.0: CLIP
// ViT-L/14 at 336 pixels, llava-1.5's); a file's own vision_config takes
// CLIPVisionConfig's defaults for the keys it leaves out (768 wide, 12
// layers of 12 heads, intermediate 3072, images of 224, patches of 32,
// quick_gelu; configuration_clip.py).
var llavaDefaultVision = map[string]any{
	"model_type": "clip_vision_model", "hidden_size": json.Number("1024"), "intermediate_size": json.Number("4096"), "patch_size": json.Number("14"),
	"image_size": json.Number("336"), "num_hidden_layers": json.Number("24"), "num_attention_heads": json.Number("16"),
}

// llavaVision reads vision_config (absent: the family's default tower)
// and the top level's vision_feature_layer (-2),
// vision_feature_select_strategy ("default"), projector_hidden_act (gelu)
// and multimodal_projector_bias (true), as LlavaConfig and
// LlavaNextConfig default them (the caller sets LlavaOnevisionConfig's
// -1 and "full" when the file leaves them out). The tower is CLIP's, or
// with anyres (the AnyRes families, tiled so) SigLIP's too: a file's own
// vision_config takes CLIPVisionConfig's or SiglipVisionConfig's
// defaults for the keys it leaves out (768 wide, 12 layers of 12 heads,
// intermediate 3072, images of 224; patches of 32 and quick_gelu, or 16
// and gelu_pytorch_tanh with the pooling head, vision_use_head true;
// configuration_clip.py, configuration_siglip.py, transformers 5.25.0).
func llavaVision(c, tc *hfConfig, attn string, absent map[string]any, anyres *nn.AnyRes) *nn.LlavaVision {
	if !c.has("vision_config") {
		c.raw["vision_config"] = absent
	}
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	patch, act, siglip := int64(32), "quick_gelu", anyres != nil
	switch mt := vc.str("model_type", "clip_vision_model"); {
	case mt == "clip_vision_model":
		siglip = false
	case mt == "siglip_vision_model" && siglip:
		patch, act = 16, "gelu_pytorch_tanh"
	case siglip:
		vc.fail("model_type", "must be CLIP's, \"clip_vision_model\", or SigLIP's, \"siglip_vision_model\" (got %q)", mt)
	default:
		vc.fail("model_type", "must be CLIP's, \"clip_vision_model\", or Pixtral's, \"pixtral\" (got %q)", mt)
	}
	layers := vc.sizeOr("num_hidden_layers", 12)
	v := &nn.LlavaVision{Dim: vc.sizeOr("hidden_size", 768), Layers: layers, Heads: vc.sizeOr("num_attention_heads", 12),
		Inter: vc.sizeOr("intermediate_size", 3072), Act: vc.mlpAct("hidden_act", act, false), SquareTile: nn.SquareTile{Image: vc.sizeOr("image_size", 224),
			Patch: vc.sizeOr("patch_size", patch), Channels: vc.sizeOr("num_channels", 3)}, Features: layers - 1,
		TextDim: tc.size("hidden_size"), ProjAct: c.mlpAct("projector_hidden_act", "gelu", false),
		ProjBias: c.flag("multimodal_projector_bias", true), Siglip: siglip, Head: siglip && vc.flag("vision_use_head", true), AnyRes: anyres, Impl: attn}
	if p := vc.prob("attention_dropout", 0); p > 0 {
		vc.fail("attention_dropout", "is %g: dropout in the vision attention is not modelled (llava-1.5 uses 0.0)", p)
	}
	if c.has("vision_feature_layer") {
		// hidden_states[k]: k = 0 is the embeddings, k the output of layer k; negative from the end
		n, ok := c.raw["vision_feature_layer"].(json.Number)
		k, err := n.Int64()
		switch {
		case !ok || err != nil:
			c.fail("vision_feature_layer", "is %s: memsh models one feature layer (an integer; a list of layers is not modelled)", describeJSON(c.raw["vision_feature_layer"]))
		case k < 0:
			v.Features = layers + 1 + k
		default:
			v.Features = k
		}
	}
	switch s := c.str("vision_feature_select_strategy", "default"); s {
	case "default":
	case "full":
		v.KeepCLS = true
	default:
		c.fail("vision_feature_select_strategy", "must be \"default\" (the class token dropped) or \"full\" (got %q)", s)
	}
	if c.err = firstErr(c, vc, tc); c.err != nil {
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, llavaVisionKeys}, objectKeys{c, llavaFeatureKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	return v
}
