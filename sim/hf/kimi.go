package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildKimiK25 builds transformers' Kimi_K25ForConditionalGeneration
// (model_type kimi_k25: Kimi K2.5; modeling_kimi_k25.py, first in the
// 5.13.0 wheel): its text_config is Kimi K2's, DeepSeek-V3's architecture
// (model_type "kimi_k2", read as deepseek_v3, as Kimi_K25Config does),
// built by buildDeepSeek and named model.language_model, with lm_head
// beside it (tied to the embedding when the top-level tie_word_embeddings,
// default true, says so); the vision tower (MoonViT: model.vision_tower)
// and the projector (model.mm_projector) from vision_config and
// projection_hidden_size (kimiVision) between the text embeddings and the
// decoder layers. Videos are not modelled (train(videos=) is refused).
func buildKimiK25(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	if mt := tc.str("model_type", "deepseek_v3"); mt != "kimi_k2" && mt != "deepseek_v3" {
		tc.fail("model_type", "must be Kimi K2's, \"kimi_k2\" or \"deepseek_v3\" (got %q)", mt)
	}
	tc.modelType, tc.mtp = "deepseek_v3", c.mtp
	tc.classKeys("deepseek_v3") // DeepseekV3Config's names and defaults
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m := buildDeepSeek(tc, attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	m.Name = c.name
	// Kimi_K25Config's own tie_word_embeddings (default True) ties lm_head
	// to the language model's embedding, whatever text_config says.
	m.TieEmbeddings = c.flag("tie_word_embeddings", true)
	v := kimiVision(c, tc, attn)
	if c.err != nil {
		return nil
	}
	towerAfter(m, 1, v)
	return m
}

// kimiVisionKeys name KimiVision's checked inputs by vision_config's
// keys (the projection's width is text_config's hidden_size:
// textWidthKeys); pos_emb_width, which hf_config requires to be
// pos_emb_height, and projection_hidden_size, to be hidden_size, have
// none: hf_config says so itself.
var kimiVisionKeys = map[nn.Field]string{
	nn.FieldDim: "hidden_size", nn.FieldHeads: "num_attention_heads", nn.FieldHidden: "intermediate_size", nn.FieldDepth: "num_hidden_layers",
	nn.FieldPatch: "patch_size", nn.FieldMerge: "merge_kernel_size", nn.FieldPosHeight: "pos_emb_height", nn.FieldPosTime: "pos_emb_time",
}

// Kimi_K25ImageProcessor's defaults (image_processing_kimi_k25.py,
// 5.17.0): at most 16,384 patches an image and 512 patches a side
// (size["max_height"], read as patches by navit_resize); memsh reads no
// preprocessor_config.json.
const (
	kimiMaxPatches = 16384
	kimiMaxSide    = 512
)

// kimiVision reads vision_config at Kimi_K25VisionConfig's defaults
// (transformers 5.17.0: 27 layers of 1152, 16 heads, 4304 wide MLPs with
// gelu_pytorch_tanh, patches of 14, a 64 x 64 position grid, 4 frames,
// merge [2, 2]); the hub's own keys (vt_hidden_size, ...) are not the
// class's and transformers builds the defaults past them, as here.
// projection_hidden_size (default 1152) is mm_projector.pre_norm's width.
func kimiVision(c, tc *hfConfig, attn string) *nn.KimiVision {
	vc := c.sub("vision_config")
	if c.err != nil {
		return nil
	}
	v := &nn.KimiVision{Dim: vc.sizeOr("hidden_size", 1152), Layers: vc.sizeOr("num_hidden_layers", 27), Heads: vc.sizeOr("num_attention_heads", 16),
		Inter: vc.sizeOr("intermediate_size", 4304), Act: vc.mlpAct("hidden_act", "gelu_pytorch_tanh", false), Patch: vc.sizeOr("patch_size", 14),
		PosH: vc.sizeOr("pos_emb_height", 64), PosW: vc.sizeOr("pos_emb_width", 64), PosTime: vc.sizeOr("pos_emb_time", 4),
		ProjDim: c.sizeOr("projection_hidden_size", 1152), TextDim: tc.size("hidden_size"),
		MaxPatches: kimiMaxPatches, MaxSide: kimiMaxSide, Impl: attn}
	if k := vc.orderedInts("merge_kernel_size", []int64{2, 2}); vc.err == nil {
		if len(k) != 2 || k[0] != k[1] || k[0] <= 0 {
			vc.fail("merge_kernel_size", "is %v; memsh models a square kernel of two sizes (Kimi K2.5's [2, 2])", k)
		} else {
			v.Merge = k[0]
		}
	}
	if vc.err == nil && v.PosH != v.PosW {
		vc.fail("pos_emb_width", "(%d) must be pos_emb_height (%d): Kimi_K25VisionPositionEmbeddings resamples a square grid", v.PosW, v.PosH)
	}
	if c.err == nil && vc.err == nil && v.ProjDim != v.Dim {
		c.fail("projection_hidden_size", "(%d) must be %q (%d): mm_projector.pre_norm normalises the tower's patches", v.ProjDim, vc.at("hidden_size"), v.Dim)
	}
	if c.err = firstErr(c, vc, tc); c.err != nil {
		return nil
	}
	c.checkLayer(v, pathKeys(objectKeys{vc, kimiVisionKeys}, objectKeys{tc, textWidthKeys}))
	if c.err != nil {
		return nil
	}
	return v
}
