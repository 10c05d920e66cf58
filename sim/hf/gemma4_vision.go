package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// gemma4VisionKeys name the vision tower's checked inputs as
// vision_config does (pooling_kernel_size plays the Qwen towers' merge).
var gemma4VisionKeys = map[nn.Field]string{
	nn.FieldDim: "hidden_size", nn.FieldDepth: "num_hidden_layers", nn.FieldHeads: "num_attention_heads", nn.FieldHeadDim: "head_dim",
	nn.FieldHidden: "intermediate_size", nn.FieldPatch: "patch_size", nn.FieldMerge: "pooling_kernel_size",
	nn.FieldPositions: "position_embedding_size",
}

// gemma4VisionTower reads vision_config (Gemma4VisionConfig's defaults:
// 768 wide, 16 layers of 12 heads of 64, intermediate 3072, patches of 16,
// pooling 3, a 10,240-position table) and the top-level
// vision_soft_tokens_per_image (the processor's max_soft_tokens, which the
// hub's config.json files state; Gemma4ImageProcessor's default 280) into
// the tower and embed_vision, projecting to text_config.hidden_size.
func gemma4VisionTower(c *hfConfig, attn string) *nn.Gemma4VisionTower {
	vc := c.sub("vision_config")
	text := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	heads := vc.sizeOr("num_attention_heads", 12)
	t := &nn.Gemma4VisionTower{Dim: vc.sizeOr("hidden_size", 768), Depth: vc.sizeOr("num_hidden_layers", 16), Heads: heads,
		KVHeads: vc.sizeOr("num_key_value_heads", 12), HeadDim: vc.sizeOr("head_dim", 64), Inter: vc.sizeOr("intermediate_size", 3072),
		Act:   vc.mlpAct("hidden_activation", "gelu_pytorch_tanh", false),
		Patch: vc.sizeOr("patch_size", 16), Pool: vc.sizeOr("pooling_kernel_size", 3), Positions: vc.sizeOr("position_embedding_size", 10240),
		MaxSoftTokens: c.sizeOr("vision_soft_tokens_per_image", 280), TextDim: text.size("hidden_size"),
		Clip: vc.flag("use_clipped_linears", false), Standardize: vc.flag("standardize", false), Impl: attn}
	if vc.flag("attention_bias", false) {
		vc.fail("attention_bias", "is not modelled for Gemma 4's vision tower (got true; Gemma4VisionAttention's projections have no bias)")
	}
	if p := vc.prob("attention_dropout", 0); p > 0 && vc.err == nil {
		vc.fail("attention_dropout", "is not modelled for Gemma 4's vision tower (got %g; the released models have none)", p)
	}
	if text.err != nil {
		c.err = text.err
		return nil
	}
	vc.checkLayer(t, gemma4VisionKeys)
	if vc.err != nil {
		c.err = vc.err
		return nil
	}
	return t
}

// joinGemma4Vision puts the tower after the language model's embeddings
// (and their scale) of m, before its layers.
func joinGemma4Vision(m *core.Model, tower *nn.Gemma4VisionTower) {
	split := 0
	for i, l := range m.Layers {
		if r, ok := l.(*core.Repeat); ok && r.Name == "layers" {
			split = i
			break
		}
	}
	m.Layers = []core.Layer{
		&core.Sequential{Name: "language_model", Layers: m.Layers[:split]},
		tower,
		&core.Sequential{Name: "language_model", Layers: m.Layers[split:]},
	}
}
