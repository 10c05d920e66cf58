package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gemma3Vision is Gemma 3's vision tower (a SigLIP vision model) and its
// multi-modal projector, as transformers runs them (SiglipVisionModel in
// models/siglip/modeling_siglip.py and Gemma3MultiModalProjector in
// models/gemma3/modeling_gemma3.py, 5.25.0), named as its module tree:
// vision_tower and multi_modal_projector beside language_model.
//
//   - the processor (Gemma3ImageProcessor, do_pan_and_scan off: its
//     default) resizes every image to Image x Image pixels whatever its
//     size, fp32 pixel values; the tower casts them to its weights' dtype
//     (a bf16 model keeps a bf16 copy, which the convolution saves);
//   - embeddings: patch_embedding, a Conv2d of Patch x Patch with bias
//     (lowered as the matmul it is: it saves the images), plus the learned
//     position_embedding of one row a patch, looked up by the position_ids
//     buffer;
//   - Layers encoder layers (layer_norm1, self_attn: q_proj, k_proj,
//     v_proj and out_proj with biases, every patch of an image attending
//     to every other, no rotary embedding; layer_norm2, mlp.fc1, Act,
//     mlp.fc2 with biases), post_layernorm (every LayerNorm with a bias);
//   - multi_modal_projector: the patches made contiguous as a [images,
//     Dim, side, side] grid (a copy, which avg_pool2d saves), averaged
//     over windows of side/sqrt(Tokens) patches a side into Tokens soft
//     tokens, mm_soft_emb_norm (Gemma's RMSNorm over the tower's width, in
//     fp32: gemmaNorm) and the matmul by mm_input_projection_weight
//     [Dim, TextDim] (it folds the transposed rows into a contiguous copy,
//     which it saves); the soft tokens replace the image placeholders of
//     the text embeddings (masked_scatter; its backward keeps the mask).
//
// All images of a micro-batch run as one batch of [images, patches, Dim]:
// SDPA without a mask, or eager attention (its fp32 softmax cast back).
// flash-attn is refused: Gemma3Model sets _supports_flash_attn = False
// ("Flash Attention drops the bidirectional mask over image tokens").
// The images come from train(images=(count, height, width)); their size
// does not matter (each is resized to Image). Without them the weights
// are registered and nothing runs.
type Gemma3Vision struct {
	Dim        int64 // vision hidden_size
	Layers     int64 // num_hidden_layers
	Heads      int64 // num_attention_heads
	Inter      int64 // intermediate_size
	Act        string
	SquareTile       // image_size, patch_size, num_channels
	Tokens     int64 // mm_tokens_per_image: the soft tokens an image
	TextDim    int64 // the text model's hidden_size
	Impl       string
}

// FieldImageTokens is the soft tokens an image (Gemma 3's
// mm_tokens_per_image).
const FieldImageTokens Field = "image tokens"

func (v *Gemma3Vision) Kind() string              { return "gemma3_vision" }
func (v *Gemma3Vision) Label() string             { return "" }
func (v *Gemma3Vision) DefaultName() string       { return "" } // vision_tower and multi_modal_projector name themselves
func (v *Gemma3Vision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *Gemma3Vision) Children() []core.Layer    { return nil }
func (v *Gemma3Vision) InDim() int64              { return v.TextDim }
func (v *Gemma3Vision) OutDim() int64             { return v.TextDim }
func (v *Gemma3Vision) ReadsImages() bool         { return true }

// tokensSide is int(mm_tokens_per_image ** 0.5), the soft tokens a side.
func (v *Gemma3Vision) tokensSide() int64 { return int64(math.Sqrt(float64(v.Tokens))) }

// ImageTokens is the soft tokens one image adds to the text, whatever its
// size.
func (v *Gemma3Vision) ImageTokens() int64 { return v.Tokens }

// siglipLayer is SiglipEncoderLayer (modeling_siglip.py), whose modules
// CLIPEncoderLayer (modeling_clip.py) has too: LayerNorms with bias before
// the attention (q, k, v and out_proj with biases, the softmax in fp32)
// and the MLP (fc1, fc2 with biases).
func siglipLayer(d, heads, inter int64, act, impl string) core.Layer {
	attn := &Attention{Name: "self_attn", Dim: d, Heads: heads, QKVBias: true, OutBias: true, Impl: impl, OutName: "out_proj", SoftmaxFP32: true}
	return preNormLayer(&Norm{Name: "layer_norm1", Dim: d, Bias: true}, attn, &Norm{Name: "layer_norm2", Dim: d, Bias: true},
		&MLP{Name: "mlp", Dim: d, Hidden: inter, Act: act, Bias: true})
}

// siglipEncoderLayer is SiglipEncoderLayer's module names
// (modeling_siglip.py).
var siglipEncoderLayer = encoderLayerNames{"layer_norm1", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
	"layer_norm2", "mlp.fc1", "mlp.fc2"}

// tensors lists the parameters, as the lowering registers them.
func (v *Gemma3Vision) tensors(fn tensorFn) {
	d := v.Dim
	fn("vision_tower.embeddings.patch_embedding.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("vision_tower.embeddings.patch_embedding.bias", []int64{d}, core.RoleConv)
	fn("vision_tower.embeddings.position_embedding.weight", []int64{v.patches(), d}, core.RoleEmbed)
	for i := int64(0); i < v.Layers; i++ {
		encoderLayerTensors(fn, "vision_tower.encoder.layers."+core.Itoa(i)+".", siglipEncoderLayer, d, v.Inter, true)
	}
	fn("vision_tower.post_layernorm.weight", []int64{d}, core.RoleNorm)
	fn("vision_tower.post_layernorm.bias", []int64{d}, core.RoleNorm)
	fn("multi_modal_projector.mm_soft_emb_norm.weight", []int64{d}, core.RoleNorm)
	fn("multi_modal_projector.mm_input_projection_weight", []int64{d, v.TextDim}, core.RoleLinear)
}

// gemma3VisionParams is the tensors outside the layers (the two
// embeddings' three, post_layernorm's two, the projector's two).
const gemma3VisionParams = 7

// Params: the vision tower and the projector.
func (v *Gemma3Vision) Params() int64 { return countTensors(v.tensors, "") }

// ProjectorParams is multi_modal_projector's share of Params.
func (v *Gemma3Vision) ProjectorParams() int64 {
	return countTensors(v.tensors, "multi_modal_projector.")
}

func (v *Gemma3Vision) Summary() string {
	return fmt.Sprintf("%d layers of %d, %d heads, images of %d px, patch %d, %d tokens an image, -> %d", v.Layers, v.Dim, v.Heads, v.Image, v.Patch, v.Tokens, v.TextDim)
}

func (v *Gemma3Vision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldImageTokens, v.Tokens},
		sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldInChans, v.Channels, 1 << 6}, bounded{FieldImage, v.Image, 1 << 14}, bounded{FieldImageTokens, v.Tokens, 1 << 20},
		bounded{FieldTextDim, v.TextDim, 1 << 20}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if v.Image%v.Patch != 0 {
		return fieldErr(path, FieldPatch, fmt.Sprintf(" (%d) must divide ", v.Patch), FieldImage, fmt.Sprintf(" (%d)", v.Image)).
			withHint("position_embedding has one row a patch of the resized image")
	}
	if t := v.tokensSide(); t*t != v.Tokens || v.side()%t != 0 {
		return fieldErr(path, FieldImageTokens, fmt.Sprintf(" (%d) must be the square of a divisor of the %d patches of an image's side", v.Tokens, v.side())).
			withHint("Gemma3MultiModalProjector averages the side x side patches over square windows into mm_tokens_per_image tokens (Gemma 3: 64 x 64 patches into 16 x 16)")
	}
	switch v.Impl {
	case "sdpa", "eager":
	case "flash":
		return fieldErr(path, "Gemma 3's vision-language model has no flash-attention path").
			withHint("transformers' Gemma3Model sets _supports_flash_attn = False (flash-attn drops the bidirectional mask over image tokens); use ", FieldImpl, `="sdpa"`)
	default:
		return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: sdpa, eager)", v.Impl))
	}
	return nil
}

// CheckLayout: the vision tower runs on each data-parallel replica whole.
func (v *Gemma3Vision) CheckLayout(path string, par core.Parallelism) error {
	return dataParallelOnly(path, "Gemma 3's vision tower", par, "use dp, fsdp or zero; or train the text model alone from a gemma3_text config")
}

// registerIdle registers the weights and the position_ids buffer when no
// image runs.
func (v *Gemma3Vision) registerIdle(b *core.Builder) {
	registerTensors(b, v.Layers*16+gemma3VisionParams, v.tensors)
	v.positionIDs(b, "vision_tower.embeddings.")
}

// positionIDs is SiglipVisionEmbeddings' position_ids: a non-persistent
// int64 buffer [1, patches].
func (v *Gemma3Vision) positionIDs(b *core.Builder, prefix string) {
	b.Buffer(prefix+"position_ids", []int64{1, v.patches()}, units.INT64, "the patches' positions (a non-persistent int64 buffer)")
}

// BlockPaths are the tower's SiglipEncoderLayers (FSDP units:
// core.BlockLister).
func (v *Gemma3Vision) BlockPaths() []string {
	return numbered("vision_tower.encoder.layers", v.Layers)
}
