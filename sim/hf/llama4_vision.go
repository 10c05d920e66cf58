package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// llama4VisionKeys name Llama4Vision's checked inputs by vision_config's
// keys (the projection's width is text_config's hidden_size:
// textWidthKeys).
var llama4VisionKeys = map[nn.Field]string{
	nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size",
	nn.FieldImage: "image_size", nn.FieldPatch: "patch_size", nn.FieldShuffle: "pixel_shuffle_ratio",
	nn.FieldProjIn: "projector_input_dim", nn.FieldProjOut: "projector_output_dim", nn.FieldOutputDim: "vision_output_dim",
	nn.FieldDepth: "num_hidden_layers", nn.FieldInChans: "num_channels",
}

// llama4MaxTiles is Llama4ImageProcessor's max_patches default, the
// tiles of an image's canvas (the hub's Scout and Maverick processors
// keep it); memsh reads no preprocessor_config.json.
const llama4MaxTiles = 16

// buildLlama4Vision is Llama4ForConditionalGeneration (transformers 5.17,
// modeling_llama4.py): vision_model and multi_modal_projector
// (vision_config; nn.Llama4Vision) between the text model's embeddings
// and its layers, all named as the module tree names them:
// vision_model.model.layers.0.self_attn.q_proj.weight,
// multi_modal_projector.linear_1.weight,
// language_model.model.layers.0...., the head language_model.lm_head.
// Llama4VisionConfig's
// defaults where a key is absent; hidden_act and
// multi_modal_projector_bias are read by nothing in 5.17 (the MLPs'
// nn.GELU() and the projector's bias=False are written out), so they are
// not read here either.
func buildLlama4Vision(c, tc *hfConfig, text *core.Model, attn string) *core.Model {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	v := &nn.Llama4Vision{Dim: vc.sizeOr("hidden_size", 768), Layers: vc.sizeOr("num_hidden_layers", 34), Heads: vc.sizeOr("num_attention_heads", 16),
		Inter: vc.sizeOr("intermediate_size", 5632), SquareTile: nn.SquareTile{Image: vc.sizeOr("image_size", 448), Patch: vc.sizeOr("patch_size", 14),
			Channels: vc.sizeOr("num_channels", 3)}, ProjIn: vc.sizeOr("projector_input_dim", 4096), ProjOut: vc.sizeOr("projector_output_dim", 4096),
		OutputDim: vc.sizeOr("vision_output_dim", 7680), TextDim: tc.size("hidden_size"), MaxTiles: llama4MaxTiles, Impl: attn}
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	if len(text.Layers) != 3 { // llama4Text's embed_tokens, layers, norm
		c.err = &units.Error{Msg: "llama4's text model was not built as embed_tokens, layers, norm", Hint: hintBug}
		return nil
	}
	v.Shuffle = vc.llama4Shuffle()
	if p := vc.prob("projector_dropout", 0); p > 0 {
		vc.fail("projector_dropout", "is %g: dropout in the vision adapter is not modelled (Scout and Maverick use 0.0)", p)
	}
	if p := vc.prob("attention_dropout", 0); p > 0 {
		vc.fail("attention_dropout", "is %g: dropout in the vision attention is not modelled (Scout and Maverick use 0.0)", p)
	}
	if c.err = firstErr(c, vc); c.err != nil {
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, llama4VisionKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	text.Layers = []core.Layer{
		&core.Sequential{Name: "language_model.model", Layers: text.Layers[:1]},
		v,
		&core.Sequential{Name: "language_model.model", Layers: text.Layers[1:]},
	}
	if text.Vocab > 0 {
		text.HeadName = "language_model.lm_head" // Llama4ForCausalLM's, under language_model
	}
	c.ownBase = true
	return text
}

// llama4Shuffle is 1 / pixel_shuffle_ratio, which pixel_shuffle's views
// need whole: ratios of 1/2^k (Llama 4's 0.5) are modelled.
func (c *hfConfig) llama4Shuffle() int64 {
	r := c.number("pixel_shuffle_ratio", 0.5)
	if c.err != nil {
		return 0
	}
	k := 1 / r
	if !(r > 0 && r <= 1) || k != math.Trunc(k) || k > 64 || int64(k)&(int64(k)-1) != 0 {
		c.fail("pixel_shuffle_ratio", "is %g; memsh models 1/2, 1/4, ... (Llama 4's 0.5: each token merges 2 x 2 patches)", r)
		return 0
	}
	return int64(k)
}
