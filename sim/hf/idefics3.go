package hf

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildIdefics3 builds transformers' Idefics3ForConditionalGeneration
// (model_type idefics3: HuggingFaceM4/Idefics3-8B-Llama3, and
// HuggingFaceTB's SmolVLM-256M-, 500M- and SmolVLM-Instruct) and
// SmolVLMForConditionalGeneration (model_type smolvlm: the SmolVLM2
// checkpoints), which build the same modules (models/idefics3 and
// models/smolvlm, 5.25.0): text_config's Llama model named
// model.text_model, with lm_head beside it, tied when the top level's
// tie_word_embeddings says so (Idefics3Config's default false;
// text_config's is not read: from_config on the meta device, 5.25.0);
// the vision model and the connector (model.vision_model,
// model.connector; nn.Idefics3Vision) between the text embeddings and
// the decoder layers. SmolVLM's tower also reads train(videos=) (SmolVLM2's
// video processor; Idefics3's processor has none).
func buildIdefics3(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	if mt := tc.str("model_type", "llama"); mt != "llama" {
		tc.fail("model_type", "must be \"llama\" (got %q): Idefics3 and SmolVLM build a Llama text model", mt)
	}
	tc.modelType = "llama"
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	tc.withDefaults(llavaTextDefaults["llama"])
	m := buildDecoder(tc, attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	m.TieEmbeddings = m.Vocab > 0 && c.flag("tie_word_embeddings", false)
	v := idefics3Vision(c, tc, attn)
	if c.err != nil {
		return nil
	}
	towerAfterAs(m, 1, v, "text_model")
	return m
}

// idefics3VisionKeys name Idefics3Vision's checked inputs by
// vision_config's keys, idefics3ScaleKeys by the top object's.
var (
	idefics3VisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size", nn.FieldDepth: "num_hidden_layers",
		nn.FieldInChans: "num_channels", nn.FieldPatch: "patch_size", nn.FieldImage: "image_size",
	}
	idefics3ScaleKeys = map[nn.Field]string{nn.FieldMerge: "scale_factor"}
)

// idefics3Vision reads vision_config with Idefics3VisionConfig's and
// SmolVLMVisionConfig's defaults for the keys it leaves out (1152 wide, 12
// layers of 16 heads, intermediate 3072, tiles of 224 pixels in patches
// of 32, gelu_pytorch_tanh: configuration_idefics3.py; SmolVLM2's configs
// leave out num_hidden_layers and intermediate_size) and the top level's
// scale_factor (default 2).
func idefics3Vision(c, tc *hfConfig, attn string) *nn.Idefics3Vision {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	v := &nn.Idefics3Vision{Dim: vc.sizeOr("hidden_size", 1152), Layers: vc.sizeOr("num_hidden_layers", 12), Heads: vc.sizeOr("num_attention_heads", 16),
		Inter: vc.sizeOr("intermediate_size", 3072), Act: vc.mlpAct("hidden_act", "gelu_pytorch_tanh", false), SquareTile: nn.SquareTile{Image: vc.sizeOr("image_size", 224),
			Patch: vc.sizeOr("patch_size", 32), Channels: vc.sizeOr("num_channels", 3)}, Scale: c.sizeOr("scale_factor", 2),
		TextDim: tc.size("hidden_size"), Impl: attn, Videos: c.modelType == "smolvlm"}
	if p := vc.prob("attention_dropout", 0); p > 0 {
		vc.fail("attention_dropout", "is %g: dropout in the vision attention is not modelled (the checkpoints use 0.0)", p)
	}
	if c.err = firstErr(c, vc, tc); c.err != nil {
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, idefics3VisionKeys}, objectKeys{c, idefics3ScaleKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	idefics3Processor(c, v)
	if c.err != nil {
		return nil
	}
	return v
}

// idefics3Processor reads the image options of processor= (the
// preprocessor_config.json of Idefics3ImageProcessor and
// SmolVLMImageProcessor, image_processing_idefics3.py, 5.25.0):
// size["longest_edge"], the edge every image's longest is resized to
// before the tiling (Longest; the processors' own default is 4 x 364,
// the hub's configs 4 x image_size, which memsh takes when it is left
// out); do_image_splitting (default true; false squares every image to
// one tile); max_image_size["longest_edge"], the tile, which must be
// vision_config's image_size, as the hub's processors keep it. A size of
// height and width (no longest_edge) is refused; the video processor's
// options are its own file's and not read (a frame is one tile whatever
// they are).
func idefics3Processor(c *hfConfig, v *nn.Idefics3Vision) {
	p := c.proc
	if p == nil {
		return
	}
	c.procRead = true
	if p.has("size") {
		s := p.sub("size")
		if s.err == nil && !s.has("longest_edge") {
			s.fail("longest_edge", "is missing: memsh models a size of {\"longest_edge\": N}, the edge every image's longest is resized to (the hub's 4 x image_size)")
		}
		v.Longest = s.size("longest_edge")
		p.err = firstErr(p, s)
	}
	if p.has("max_image_size") {
		m := p.sub("max_image_size")
		if n := m.size("longest_edge"); m.err == nil && n != v.Image {
			m.fail("longest_edge", "is %d: memsh models tiles of vision_config's image_size (%d), as the hub's processors keep them", n, v.Image)
		}
		p.err = firstErr(p, m)
	}
	v.NoSplit = !p.flag("do_image_splitting", true)
	if p.err != nil {
		c.err = &units.Error{Msg: "preprocessor_config.json: " + strings.Replace(p.err.Msg, "config.json has", "it has", 1), Hint: "processor= is the checkpoint's preprocessor_config.json; leave it out for the hub's defaults"}
	}
}
