package hf

import (
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildLFM2VL builds transformers' Lfm2VlForConditionalGeneration
// (model_type lfm2_vl: LiquidAI/LFM2-VL-450M, -1.6B, -3B and the LFM2.5-VL
// checkpoints; models/lfm2_vl/modeling_lfm2_vl.py, 5.25.0): text_config's
// LFM2 (or LFM2-MoE) model named model.language_model, with lm_head beside
// it, tied unless the top level's tie_word_embeddings (or the legacy
// tie_embedding, which Lfm2VlConfig.__post_init__ pops over it) says false
// (text_config's is not read: checked on the meta device); vision_config's
// SigLIP2 NaFlex tower and the projector (model.vision_tower,
// model.multi_modal_projector; nn.Lfm2VlVision) between the text
// embeddings and the decoder layers.
func buildLFM2VL(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	mt := tc.str("model_type", "lfm2")
	if mt != "lfm2" && mt != "lfm2_moe" {
		tc.fail("model_type", "must be \"lfm2\" or \"lfm2_moe\" (got %q): LFM2-VL builds an LFM2 text model", mt)
	}
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	tc.modelType = mt
	m := tc.lfm2Stack(attn, head, mt == "lfm2_moe")
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	tie := c.flag("tie_word_embeddings", true)
	if c.has("tie_embedding") {
		tie = c.flag("tie_embedding", true)
	}
	m.TieEmbeddings = m.Vocab > 0 && tie
	v := lfm2VLVision(c, tc, attn)
	if c.err != nil {
		return nil
	}
	towerAfter(m, 1, v)
	return m
}

// lfm2VLVisionKeys name Lfm2VlVision's checked inputs by vision_config's
// keys, lfm2VLTopKeys by the top object's.
var (
	lfm2VLVisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size", nn.FieldDepth: "num_hidden_layers",
		nn.FieldInChans: "num_channels", nn.FieldPatch: "patch_size", nn.FieldPositions: "num_patches",
	}
	lfm2VLTopKeys = map[nn.Field]string{nn.FieldDownsampleFactor: "downsample_factor", nn.FieldOutputDim: "projector_hidden_size"}
)

// lfm2VLVision reads vision_config with Siglip2VisionConfig's defaults
// for the keys it leaves out (768 wide, 12 layers of 12 heads,
// intermediate 3072, patches of 16, 256 positions, gelu_pytorch_tanh:
// configuration_siglip2.py) and the top level's projector keys with
// Lfm2VlConfig's (downsample_factor 2, projector_hidden_size 2560,
// projector_bias and projector_use_layernorm true, projector_hidden_act
// gelu). vision_use_head (Siglip2VisionConfig's default true) must be
// false, as the LFM2-VL checkpoints set it: the pooling head's output is
// unused and its weights get no gradient, which memsh does not model.
func lfm2VLVision(c, tc *hfConfig, attn string) *nn.Lfm2VlVision {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	if mt := vc.str("model_type", "siglip2_vision_model"); vc.err == nil && mt != "siglip2_vision_model" {
		vc.fail("model_type", "must be \"siglip2_vision_model\" (got %q): LFM2-VL's tower is SigLIP2 NaFlex", mt)
	}
	switch {
	case !vc.has("vision_use_head"):
		vc.fail("vision_use_head", "is left out, and Siglip2VisionConfig's default (true) builds a pooling head LFM2-VL never reads, which memsh does not model; the LFM2-VL checkpoints set it false")
	case vc.flag("vision_use_head", true):
		vc.fail("vision_use_head", "is true: the pooling head LFM2-VL never reads is not modelled; the LFM2-VL checkpoints set it false")
	}
	if p := vc.prob("attention_dropout", 0); p > 0 {
		vc.fail("attention_dropout", "is %g: dropout in the vision attention is not modelled (the checkpoints use 0.0)", p)
	}
	v := &nn.Lfm2VlVision{Dim: vc.sizeOr("hidden_size", 768), Layers: vc.sizeOr("num_hidden_layers", 12), Heads: vc.sizeOr("num_attention_heads", 12),
		Inter: vc.sizeOr("intermediate_size", 3072), Act: vc.mlpAct("hidden_act", "gelu_pytorch_tanh", false), Patch: vc.sizeOr("patch_size", 16),
		Channels: vc.sizeOr("num_channels", 3), Positions: vc.sizeOr("num_patches", 256), Factor: c.sizeOr("downsample_factor", 2),
		ProjHidden: c.sizeOr("projector_hidden_size", 2560), ProjAct: c.mlpAct("projector_hidden_act", "gelu", false),
		ProjBias: c.flag("projector_bias", true), ProjNorm: c.flag("projector_use_layernorm", true), TextDim: tc.size("hidden_size"),
		Impl: attn, Proc: nn.Lfm2VlProcessorDefaults}
	if c.err = firstErr(c, vc, tc); c.err != nil {
		return nil
	}
	lfm2VLProcessor(c, v)
	if c.err != nil {
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, lfm2VLVisionKeys}, objectKeys{c, lfm2VLTopKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	return v
}

// lfm2VLProcessor reads the image options of processor= (the
// preprocessor_config.json of Lfm2VlImageProcessor, or a
// processor_config.json whose image_processor object holds them;
// image_processing_lfm2_vl.py, 5.25.0) over the class's defaults:
// tile_size, min_image_tokens, max_image_tokens, min_tiles, max_tiles,
// use_thumbnail, do_image_splitting, max_pixels_tolerance, and
// use_image_special_tokens (Lfm2VlProcessor's, default true).
// encoder_patch_size and downsample_factor must be the model's
// patch_size and downsample_factor; max_num_patches is not read (the
// processor recomputes it). Without processor= the defaults hold, whose
// patch (16) and factor (2) the model's must be.
func lfm2VLProcessor(c *hfConfig, v *nn.Lfm2VlVision) {
	p := c.proc
	if p == nil {
		// the processor's defaults: patches of 16, blocks of 2
		if v.Patch != 16 || v.Factor != 2 {
			c.err = &units.Error{Msg: fmt.Sprintf("vision_config.patch_size (%d) and downsample_factor (%d) are not Lfm2VlImageProcessor's defaults (encoder_patch_size 16, downsample_factor 2), which train(images=) takes without processor=", v.Patch, v.Factor),
				Hint: "pass the checkpoint's preprocessor_config.json (or processor_config.json) as processor=, with its encoder_patch_size and downsample_factor"}
		}
		return
	}
	c.procRead = true
	pr := &v.Proc
	pr.NoTags = !p.flag("use_image_special_tokens", true) // Lfm2VlProcessor's, beside image_processor
	if p.has("image_processor") {
		p = p.sub("image_processor")
	}
	pr.Tile = p.sizeOr("tile_size", pr.Tile)
	pr.MinTokens, pr.MaxTokens = p.sizeOr("min_image_tokens", pr.MinTokens), p.sizeOr("max_image_tokens", pr.MaxTokens)
	pr.MinTiles, pr.MaxTiles = p.sizeOr("min_tiles", pr.MinTiles), p.sizeOr("max_tiles", pr.MaxTiles)
	pr.Thumbnail = p.flag("use_thumbnail", pr.Thumbnail)
	pr.NoSplit = !p.flag("do_image_splitting", true)
	pr.Tolerance = p.number("max_pixels_tolerance", pr.Tolerance)
	if n := p.sizeOr("encoder_patch_size", v.Patch); p.err == nil && n != v.Patch {
		p.fail("encoder_patch_size", "is %d: it must be vision_config's patch_size (%d), the patches the tower embeds", n, v.Patch)
	}
	if n := p.sizeOr("downsample_factor", v.Factor); p.err == nil && n != v.Factor {
		p.fail("downsample_factor", "is %d: it must be config.json's downsample_factor (%d), the blocks the projector merges", n, v.Factor)
	}
	tf := v.Patch * v.Factor
	switch {
	case p.err != nil:
	case pr.Tile > 1<<14 || pr.MaxTokens > 1<<16 || pr.MaxTiles > 1<<8:
		p.fail("tile_size", "(%d), max_image_tokens (%d) or max_tiles (%d) is more than memsh simulates (at most %d, %d and %d)", pr.Tile, pr.MaxTokens, pr.MaxTiles, 1<<14, 1<<16, 1<<8)
	case pr.Tile%tf != 0:
		p.fail("tile_size", "is %d: it must be a multiple of patch_size x downsample_factor (%d), so that a tile's patches gather into whole blocks", pr.Tile, tf)
	case pr.MaxTokens < pr.MinTokens:
		p.fail("max_image_tokens", "(%d) is less than min_image_tokens (%d)", pr.MaxTokens, pr.MinTokens)
	case !pr.NoSplit && pr.MaxTiles < pr.MinTiles:
		p.fail("max_tiles", "(%d) is less than min_tiles (%d): the processor raises", pr.MaxTiles, pr.MinTiles)
	case !(pr.Tolerance > 0) || pr.Tolerance > 1<<20 || math.IsInf(pr.Tolerance, 0):
		p.fail("max_pixels_tolerance", "must be a positive number (got %g)", pr.Tolerance)
	}
	if p.err != nil {
		c.err = &units.Error{Msg: "preprocessor_config.json: " + strings.Replace(p.err.Msg, "config.json has", "it has", 1),
			Hint: "processor= is the checkpoint's preprocessor_config.json (or processor_config.json); leave it out for Lfm2VlImageProcessor's defaults"}
	}
}
