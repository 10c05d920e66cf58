package hf

import (
	"encoding/json"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// gemma3VisionKeys name Gemma3Vision's checked inputs by vision_config's
// keys, gemma3TokenKeys by the top object's (the projection's width is
// text_config's hidden_size: textWidthKeys).
var (
	gemma3VisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size",
		nn.FieldDepth: "num_hidden_layers", nn.FieldInChans: "num_channels", nn.FieldPatch: "patch_size", nn.FieldImage: "image_size",
	}
	gemma3TokenKeys = map[nn.Field]string{nn.FieldImageTokens: "mm_tokens_per_image"}
)

// gemma3TextDefaults are Gemma3TextConfig's defaults for the sizes the
// hub's gemma3 config.json files leave out of text_config (Gemma 3 4B
// states only hidden_size, intermediate_size and num_hidden_layers;
// configuration_gemma3.py, transformers 5.25.0).
var gemma3TextDefaults = map[string]json.Number{
	"vocab_size": "262208", "hidden_size": "2304", "intermediate_size": "9216", "num_hidden_layers": "26",
	"num_attention_heads": "8", "num_key_value_heads": "4", "head_dim": "256",
}

// buildGemma3 builds Gemma3ForConditionalGeneration (model_type gemma3:
// Gemma 3 4B, 12B and 27B, -it and -pt; models/gemma3/modeling_gemma3.py,
// first in the 4.50.0 wheel): the SigLIP vision tower and the projector
// (vision_config; nn.Gemma3Vision) after the text model's scaled
// embeddings, before its layers, all named as the module tree names them:
// model.vision_tower.encoder.layers.0.self_attn.q_proj.weight,
// model.multi_modal_projector.mm_input_projection_weight,
// model.language_model.layers.0.... The language model is
// text_config's Gemma 3 decoder (gemma3_text, buildDecoder), its absent
// sizes Gemma3TextConfig's defaults; the head is tied to the embeddings
// (tie_word_embeddings, default true). With images the text attention
// gets the processor's token_type_ids mask in every layer (nn.Attention's
// ImageMask). SiglipVisionConfig's defaults where vision_config leaves a
// key out; vision_use_head (its default true) must be false, as in every
// Gemma 3 checkpoint: the attention-pooling head is not modelled.
// arch="Gemma3Model" is the same without the head; arch="Gemma3ForCausalLM"
// builds the text model alone, as Gemma3ForCausalLM.from_pretrained does
// on a gemma3 checkpoint (PreTrainedConfig.from_pretrained reads the
// sub-dict of its model_type, text_config: 3,880,263,168 parameters for
// the 4B, transformers 5.25.0 on the meta device).
func buildGemma3(c *hfConfig, attn string, head hfHead) *core.Model {
	vision := !strings.HasSuffix(c.arch, "ForCausalLM") // Gemma3Model holds the tower too
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	tc.withDefaults(gemma3TextDefaults)
	tc.modelType, tc.arch = "gemma3_text", c.arch
	m := buildDecoder(tc, attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	m.TieEmbeddings = m.Vocab > 0 && c.flag("tie_word_embeddings", true)
	split := -1
	for i, l := range m.Layers {
		if _, ok := l.(*nn.Scale); ok {
			split = i + 1 // the image tokens replace placeholders of the scaled embeddings
		}
	}
	if split < 0 {
		c.err = &units.Error{Msg: "gemma3's text model was built without its embedding scale", Hint: hintBug}
		return nil
	}
	if !vision {
		return m // Gemma3ForCausalLM: the text model alone, named as it names it (model.layers...)
	}
	v := gemma3Vision(c, tc, attn)
	if c.err != nil {
		return nil
	}
	for _, l := range m.Layers[split:] {
		core.Walk(l, "", func(_ string, x core.Layer) {
			if a, ok := x.(*nn.Attention); ok {
				a.ImageMask = true
			}
		})
	}
	towerAfter(m, split, v)
	return m
}

// gemma3Vision reads vision_config (SiglipVisionConfig's defaults: 768
// wide, 12 layers of 12 heads, intermediate 3072, images of 224 pixels,
// patches of 16, gelu_pytorch_tanh) and the top-level mm_tokens_per_image
// (Gemma3Config's default 256) into the tower and the projector.
func gemma3Vision(c, tc *hfConfig, attn string) *nn.Gemma3Vision {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	v := &nn.Gemma3Vision{Dim: vc.sizeOr("hidden_size", 768), Layers: vc.sizeOr("num_hidden_layers", 12), Heads: vc.sizeOr("num_attention_heads", 12),
		Inter: vc.sizeOr("intermediate_size", 3072), Act: vc.mlpAct("hidden_act", "gelu_pytorch_tanh", false),
		SquareTile: nn.SquareTile{Image: vc.sizeOr("image_size", 224), Patch: vc.sizeOr("patch_size", 16), Channels: vc.sizeOr("num_channels", 3)},
		Tokens:     c.sizeOr("mm_tokens_per_image", 256), TextDim: tc.size("hidden_size"), Impl: attn}
	if vc.flag("vision_use_head", true) {
		vc.fail("vision_use_head", "is true (SiglipVisionConfig's default when absent): SigLIP's attention-pooling head is not modelled; every Gemma 3 checkpoint sets false, as Gemma 3 reads no pooled output")
	}
	if p := vc.prob("attention_dropout", 0); p > 0 {
		vc.fail("attention_dropout", "is %g: dropout in the vision attention is not modelled (Gemma 3 uses 0.0)", p)
	}
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	if vc.err != nil {
		c.err = vc.err
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, gemma3VisionKeys}, objectKeys{c, gemma3TokenKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	return v
}
