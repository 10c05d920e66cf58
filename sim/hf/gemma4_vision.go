package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// The keys that name the Gemma 4 towers' checked inputs (field_names.go):
// the vision tower's as vision_config has them (pooling_kernel_size plays
// the Qwen towers' merge) and the top-level
// vision_soft_tokens_per_image; the audio tower's as audio_config has
// them.
var (
	gemma4VisionKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldDepth: "num_hidden_layers", nn.FieldHeads: "num_attention_heads", nn.FieldKVHeads: "num_key_value_heads",
		nn.FieldHeadDim: "head_dim", nn.FieldHidden: "intermediate_size", nn.FieldPatch: "patch_size", nn.FieldMerge: "pooling_kernel_size",
	}
	gemma4SoftTokenKeys = map[nn.Field]string{nn.FieldSoftTokens: "vision_soft_tokens_per_image"}
	gemma4AudioKeys     = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldDepth: "num_hidden_layers", nn.FieldOutputDim: "output_proj_dims",
		nn.FieldConvKernel: "conv_kernel_size", nn.FieldSubsampling: "subsampling_conv_channels",
	}
)

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
	if c.err = firstErr(c, text, vc); c.err != nil {
		return nil
	}
	c.checkLayer(t, pathKeys(objectKeys{vc, gemma4VisionKeys}, objectKeys{c, gemma4SoftTokenKeys}))
	if c.err != nil {
		return nil
	}
	return t
}

// gemma4AudioTower reads audio_config (Gemma4AudioConfig's defaults: 1024
// wide, 12 layers of 8 heads, subsampling channels 128 and 32, conv kernel
// 5, output 1536) into the audio tower's weights and embed_audio.
func gemma4AudioTower(c *hfConfig) *nn.Gemma4AudioTower {
	ac := c.sub("audio_config")
	text := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	t := &nn.Gemma4AudioTower{Dim: ac.sizeOr("hidden_size", 1024), Depth: ac.sizeOr("num_hidden_layers", 12), Heads: ac.sizeOr("num_attention_heads", 8),
		ConvKernel: ac.sizeOr("conv_kernel_size", 5), ProjDim: ac.sizeOr("output_proj_dims", 1536), TextDim: text.size("hidden_size")}
	ch := ac.orderedInts("subsampling_conv_channels", []int64{128, 32})
	if len(ch) != 2 && ac.err == nil {
		ac.fail("subsampling_conv_channels", "must list the two subsampling convolutions' channels (got %d values)", len(ch))
	}
	if len(ch) == 2 {
		t.Channels = [2]int64{ch[0], ch[1]}
	}
	if c.err = firstErr(c, text, ac); c.err != nil {
		return nil
	}
	ac.checkLayer(t, gemma4AudioKeys)
	if ac.err != nil {
		c.err = ac.err
		return nil
	}
	return t
}

// joinGemma4Towers puts the towers after the language model's embeddings
// (and their scale) of m, before its layers: the vision tower's soft
// tokens replace the image placeholders there.
func joinGemma4Towers(m *core.Model, towers []core.Layer) {
	split := 0
	for i, l := range m.Layers {
		if r, ok := l.(*core.Repeat); ok && r.Name == "layers" {
			split = i
			break
		}
	}
	ls := []core.Layer{&core.Sequential{Name: "language_model", Layers: m.Layers[:split]}}
	ls = append(ls, towers...)
	m.Layers = append(ls, &core.Sequential{Name: "language_model", Layers: m.Layers[split:]})
}
