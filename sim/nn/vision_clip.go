package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// LlavaVision is LLaVA's vision tower (a CLIP vision model,
// CLIPVisionModel in models/clip/modeling_clip.py) and its projector
// (LlavaMultiModalProjector, models/llava/modeling_llava.py), as
// transformers 5.25.0 runs them in LlavaModel.get_image_features, named
// as its module tree: vision_tower and multi_modal_projector beside
// language_model.
//
//   - the processor (CLIPImageProcessor: shortest edge to Image, then a
//     centre crop) makes every image Image x Image pixels whatever its
//     size, fp32 pixel values; the tower casts them to its weights' dtype
//     (a bf16 model keeps a bf16 copy, which the convolution saves);
//   - embeddings: patch_embedding, a Conv2d of Patch x Patch without bias
//     (lowered as the matmul it is), class_embedding prepended to each
//     image's patches (torch.cat, a copy), plus the learned
//     position_embedding of one row a patch and one for the class token;
//     pre_layrnorm (a LayerNorm with bias);
//   - encoder.layers: CLIPEncoderLayers (layer_norm1, self_attn: q_proj,
//     k_proj, v_proj, out_proj with biases, no mask, no rotary embedding;
//     layer_norm2, mlp.fc1, Act, mlp.fc2 with biases), SigLIP's layer
//     (siglipEncoderLayer) under the same names;
//   - the features are the hidden states after Features layers
//     (vision_feature_layer: -2, llava-1.5's, is the output of the last
//     layer but one); without KeepCLS ("default") each image's class
//     token is dropped ([:, 1:], a view; linear_1 folds it into a
//     contiguous copy when more than one image runs, which it saves);
//   - multi_modal_projector: linear_1 (Dim to TextDim), ProjAct, linear_2,
//     with biases when ProjBias; the images' tokens concatenated
//     (torch.cat, a copy) replace the placeholders of the text embeddings
//     (masked_scatter; its backward keeps the mask).
//
// The layers after Features and post_layernorm (on the class token) run
// in transformers, but nothing reads their outputs: their weights get no
// gradient, so memsh registers them unread (under torch.optim they hold
// no optimizer state). Their forward runs as under no_grad (unread): its
// FLOPs counted, nothing saved, since their activations live only while
// the model's output (which holds image_outputs) lives, which a training
// loop that keeps just the loss drops before the backward.
// All images of a micro-batch run as one batch of [images, tokens, Dim]
// (SDPA, eager attention, or flash-attn). Without images the weights are
// registered and nothing runs.
//
// With Siglip the tower is a SigLIP vision model (SiglipVisionModel,
// models/siglip/modeling_siglip.py: LLaVA-OneVision's): patch_embedding
// with a bias, no class token and no pre_layrnorm, post_layernorm over
// every patch (the hidden states it reads are the last layer's, before
// it: unread too, as is the pooling head with Head). With AnyRes (LLaVA-NeXT, LLaVA-OneVision) every image
// is cut into tiles (AnyRes), each through the tower, and
// pack_image_features lays their tokens out as one image with a newline
// (image_newline, a parameter beside the tower) closing every row. With
// Videos (LLaVA-OneVision) the tower runs again on the videos' frames,
// each frame's patches pooled 2 x 2 (pool).
type LlavaVision struct {
	Dim        int64 // vision hidden_size
	Layers     int64 // num_hidden_layers
	Heads      int64 // num_attention_heads
	Inter      int64 // intermediate_size
	Act        string
	SquareTile       // image_size, patch_size, num_channels
	Features   int64 // the layers whose output the projector reads (from vision_feature_layer)
	KeepCLS    bool  // vision_feature_select_strategy "full": the class token is an image token too
	TextDim    int64 // the text model's hidden_size
	ProjAct    string
	ProjBias   bool    // multimodal_projector_bias
	Siglip     bool    // the tower is SiglipVisionModel, not CLIPVisionModel
	Head       bool    // SigLIP's vision_use_head: its pooling head, unread
	AnyRes     *AnyRes // LLaVA-NeXT's tiling; nil for llava-1.5's one crop an image
	Videos     bool    // LLaVA-OneVision: train(videos=) frames through the tower, pooled 2 x 2
	Impl       string
}

// FieldFeatureLayer is the encoder layers whose output the projector reads
// (LLaVA's vision_feature_layer).
const FieldFeatureLayer Field = "feature layer"

func (v *LlavaVision) Kind() string              { return "llava_vision" }
func (v *LlavaVision) Label() string             { return "" }
func (v *LlavaVision) DefaultName() string       { return "" } // vision_tower and multi_modal_projector name themselves
func (v *LlavaVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *LlavaVision) Children() []core.Layer    { return nil }
func (v *LlavaVision) InDim() int64              { return v.TextDim }
func (v *LlavaVision) OutDim() int64             { return v.TextDim }
func (v *LlavaVision) ReadsImages() bool         { return true }
func (v *LlavaVision) ReadsVideos() bool         { return v.Videos }

// tokens is the tower's tokens a tile: its patches, and CLIP's class token.
func (v *LlavaVision) tokens() int64 {
	if v.Siglip {
		return v.patches()
	}
	return v.patches() + 1
}

// ImageTokens is the tokens one tile adds to the text: the tower's, less
// the first without KeepCLS (CLIP's class token; LlavaProcessor's
// num_image_tokens: an image's, whatever its size, without AnyRes).
func (v *LlavaVision) ImageTokens() int64 {
	if v.KeepCLS {
		return v.tokens()
	}
	return v.tokens() - 1 // [:, 1:]
}

// layout is how each of the plan's images runs: one tile of ImageTokens
// without AnyRes, else its tiling.
func (v *LlavaVision) layout(im core.Images) anyresLayout {
	if v.AnyRes == nil {
		return anyresLayout{Tiles: 1, Tokens: v.ImageTokens()}
	}
	return v.AnyRes.layout(im.Height, im.Width, v.Image, v.side(), im.Count)
}

// tensors lists the parameters, as the lowering registers them.
func (v *LlavaVision) tensors(fn tensorFn) {
	if v.AnyRes != nil {
		fn("image_newline", []int64{v.TextDim}, core.RoleEmbed)
	}
	v.embeddingTensors(fn, "vision_tower.")
	v.layerTensors(fn, "vision_tower.", 0, v.Layers)
	v.postTensors(fn, "vision_tower.")
	v.projectorTensors(fn, "multi_modal_projector.")
}

// embeddingTensors are CLIPVisionEmbeddings' and pre_layrnorm's, or
// SiglipVisionEmbeddings'.
func (v *LlavaVision) embeddingTensors(fn tensorFn, prefix string) {
	d := v.Dim
	if v.Siglip {
		fn(prefix+"embeddings.patch_embedding.weight", []int64{d, v.patchIn()}, core.RoleConv)
		fn(prefix+"embeddings.patch_embedding.bias", []int64{d}, core.RoleConv)
		fn(prefix+"embeddings.position_embedding.weight", []int64{v.patches(), d}, core.RoleEmbed)
		return
	}
	fn(prefix+"embeddings.class_embedding", []int64{d}, core.RoleEmbed)
	fn(prefix+"embeddings.patch_embedding.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn(prefix+"embeddings.position_embedding.weight", []int64{v.tokens(), d}, core.RoleEmbed)
	fn(prefix+"pre_layrnorm.weight", []int64{d}, core.RoleNorm)
	fn(prefix+"pre_layrnorm.bias", []int64{d}, core.RoleNorm)
}

// layerTensors are encoder layers from to to (exclusive).
func (v *LlavaVision) layerTensors(fn tensorFn, prefix string, from, to int64) {
	for i := from; i < to; i++ {
		encoderLayerTensors(fn, prefix+"encoder.layers."+core.Itoa(i)+".", siglipEncoderLayer, v.Dim, v.Inter, true)
	}
}

// postTensors are post_layernorm's, and with Head SigLIP's pooling head.
func (v *LlavaVision) postTensors(fn tensorFn, prefix string) {
	fn(prefix+"post_layernorm.weight", []int64{v.Dim}, core.RoleNorm)
	fn(prefix+"post_layernorm.bias", []int64{v.Dim}, core.RoleNorm)
	if v.Head {
		v.headTensors(fn, prefix)
	}
}

// headTensors are SigLIP's pooling head's (SiglipMultiheadAttentionPoolingHead:
// probe, a torch nn.MultiheadAttention with its packed in_proj,
// layernorm, mlp).
func (v *LlavaVision) headTensors(fn tensorFn, prefix string) {
	d := v.Dim
	fn(prefix+"head.probe", []int64{1, 1, d}, core.RoleEmbed)
	fn(prefix+"head.attention.in_proj_weight", []int64{3 * d, d}, core.RoleQKV)
	fn(prefix+"head.attention.in_proj_bias", []int64{3 * d}, core.RoleQKV)
	fn(prefix+"head.attention.out_proj.weight", []int64{d, d}, core.RoleO)
	fn(prefix+"head.attention.out_proj.bias", []int64{d}, core.RoleO)
	fn(prefix+"head.layernorm.weight", []int64{d}, core.RoleNorm)
	fn(prefix+"head.layernorm.bias", []int64{d}, core.RoleNorm)
	fn(prefix+"head.mlp.fc1.weight", []int64{v.Inter, d}, core.RoleUp)
	fn(prefix+"head.mlp.fc1.bias", []int64{v.Inter}, core.RoleUp)
	fn(prefix+"head.mlp.fc2.weight", []int64{d, v.Inter}, core.RoleDown)
	fn(prefix+"head.mlp.fc2.bias", []int64{d}, core.RoleDown)
}

// projectorTensors are LlavaMultiModalProjector's.
func (v *LlavaVision) projectorTensors(fn tensorFn, prefix string) {
	fn(prefix+"linear_1.weight", []int64{v.TextDim, v.Dim}, core.RoleLinear)
	if v.ProjBias {
		fn(prefix+"linear_1.bias", []int64{v.TextDim}, core.RoleLinear)
	}
	fn(prefix+"linear_2.weight", []int64{v.TextDim, v.TextDim}, core.RoleLinear)
	if v.ProjBias {
		fn(prefix+"linear_2.bias", []int64{v.TextDim}, core.RoleLinear)
	}
}

// Params: the vision tower and the projector.
func (v *LlavaVision) Params() int64 { return countTensors(v.tensors, "") }

// TowerParams is the vision tower's share of Params (the rest is
// multi_modal_projector's and image_newline's).
func (v *LlavaVision) TowerParams() int64 { return countTensors(v.tensors, "vision_tower.") }

// tensorCount is the parameters' tensors.
func (v *LlavaVision) tensorCount() int64 {
	var n int64
	v.tensors(func(string, []int64, core.Role) { n++ })
	return n
}

func (v *LlavaVision) Summary() string {
	tower, tiles := "CLIP", "an image"
	if v.Siglip {
		tower = "SigLIP"
	}
	if v.AnyRes != nil {
		tiles = fmt.Sprintf("a tile (AnyRes over %d pinpoints)", len(v.AnyRes.Pinpoints))
	}
	return fmt.Sprintf("%s, %d layers of %d (features after %d), %d heads, tiles of %d px, patch %d, %d tokens %s, -> %d",
		tower, v.Layers, v.Dim, v.Features, v.Heads, v.Image, v.Patch, v.ImageTokens(), tiles, v.TextDim)
}

func (v *LlavaVision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldFeatureLayer, v.Features},
		sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldInChans, v.Channels, 1 << 6}, bounded{FieldImage, v.Image, 1 << 14}, bounded{FieldPatch, v.Patch, 1 << 10},
		bounded{FieldTextDim, v.TextDim, 1 << 20}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if v.Image < v.Patch {
		return fieldErr(path, FieldPatch, fmt.Sprintf(" (%d) must be at most ", v.Patch), FieldImage, fmt.Sprintf(" (%d)", v.Image)).
			withHint("position_embedding has one row a patch of the cropped image")
	}
	if v.Features > v.Layers {
		return fieldErr(path, FieldFeatureLayer, fmt.Sprintf(" (%d) must be at most ", v.Features), FieldDepth, fmt.Sprintf(" (%d)", v.Layers))
	}
	if v.AnyRes != nil {
		if err := v.AnyRes.validate(path); err != nil {
			return err
		}
		if v.KeepCLS != v.Siglip {
			got := v.tokens() - 1 // [:, 1:] drops the first token
			if v.KeepCLS {
				got = v.tokens()
			}
			return fieldErr(path, fmt.Sprintf("AnyRes tiles need %d features a tile, one a patch (got %d)", v.patches(), got)).
				withHint(`pack_image_features lays each tile's features out as its grid of patches: a CLIP tower takes vision_feature_select_strategy "default" (the class token dropped), a SigLIP tower "full"`)
		}
	}
	switch v.Impl {
	case "flash", "sdpa", "eager":
		return nil
	}
	return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa, eager)", v.Impl))
}

// registerIdle registers the weights and the position_ids buffer when no
// image runs.
func (v *LlavaVision) registerIdle(b *core.Builder) {
	registerTensors(b, v.tensorCount(), v.tensors)
	v.positionIDs(b, "vision_tower.embeddings.")
}

// positionIDs is CLIPVisionEmbeddings' (or SiglipVisionEmbeddings')
// position_ids: a non-persistent int64 buffer [1, tokens].
func (v *LlavaVision) positionIDs(b *core.Builder, prefix string) {
	b.Buffer(prefix+"position_ids", []int64{1, v.tokens()}, units.INT64, "the tokens' positions (a non-persistent int64 buffer)")
}

// BlockPaths are the tower's CLIPEncoderLayers (FSDP units:
// core.BlockLister).
func (v *LlavaVision) BlockPaths() []string {
	return numbered("vision_tower.encoder.layers", v.Layers)
}
