package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MllamaVision is Llama 3.2 Vision's image encoder and projector, as
// transformers runs them (MllamaVisionModel, MllamaModel.forward in
// models/mllama/modeling_mllama.py):
//
//   - every image is Tiles tiles of Image x Image pixels: the processor
//     pads each image to max_num_tiles tiles whatever its aspect ratio
//     (pack_images), so the sizes, and the memory, do not depend on the
//     image's size; each tile is cut into Patch x Patch patches
//     (patch_embedding, a Conv2d lowered as the matmul it is) and gets a
//     class token: P = (Image/Patch)² + 1 tokens a tile, padded to a
//     multiple of 8 (Pp);
//   - tanh-gated tile and position embeddings (each gate's tanh is
//     computed and saved where it is used), layernorm_pre;
//   - Layers local encoder layers then GlobalLayers gated ones (LayerNorm,
//     q/k/v/o without bias, an fc1-GELU-fc2 MLP with biases; the global
//     layers multiply the attention and MLP outputs by tanh(gate)), all
//     attending over the Tiles*Pp tokens of an image under one additive
//     aspect-ratio mask [images, 1, Tiles*Pp, Tiles*Pp] in the model's
//     dtype, made once and saved by every layer's SDPA;
//   - the last hidden state and the local layers' outputs at
//     Intermediate stacked and concatenated: vision_output_dim features
//     a token, which multi_modal_projector maps to the text width. These
//     image states are what the text model's cross-attention layers read
//     (MllamaCrossBlock); no image token joins the text sequence.
//
// The layer also makes the two masks MllamaModel.forward prepares from
// the processor's cross_attention_mask (_prepare_cross_attention_mask):
// the additive mask [batch, 1, seq, image tokens] and the text rows' mask.
// Only SDPA is modelled (the masks rule out flash-attn 2). The images come
// from train(images=(count, height, width)); height and width change
// nothing; without images the weights are registered and nothing runs (the
// text model skips its cross-attention layers).
type MllamaVision struct {
	Dim          int64 // vision hidden_size
	Layers       int64 // num_hidden_layers (local)
	GlobalLayers int64 // num_global_layers
	Heads        int64 // attention_heads
	Inter        int64 // intermediate_size
	Image        int64 // image_size: a tile's side in pixels
	Patch        int64
	Tiles        int64 // max_num_tiles
	Channels     int64
	Intermediate []int64 // intermediate_layers_indices
	OutputDim    int64   // vision_output_dim
	AspectRatios int64   // len(supported_aspect_ratios)
	TextDim      int64   // the text model's hidden_size (the projector's output)
	Impl         string
}

func (v *MllamaVision) Kind() string              { return "mllama_vision" }
func (v *MllamaVision) Label() string             { return "" }
func (v *MllamaVision) DefaultName() string       { return "" } // vision_model and multi_modal_projector name themselves
func (v *MllamaVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *MllamaVision) Children() []core.Layer    { return nil }
func (v *MllamaVision) InDim() int64              { return v.TextDim }
func (v *MllamaVision) OutDim() int64             { return v.TextDim }
func (v *MllamaVision) ReadsImages() bool         { return true }

// tokens is the tokens of one tile: its patches and the class token.
func (v *MllamaVision) tokens() int64 { return (v.Image/v.Patch)*(v.Image/v.Patch) + 1 }

// padded is tokens rounded up to a multiple of 8 (MllamaVisionModel.forward's F.pad).
func (v *MllamaVision) padded() int64 { return (v.tokens() + 7) / 8 * 8 }

func (v *MllamaVision) patchIn() int64 { return v.Channels * v.Patch * v.Patch }

// tensors lists the parameters, as the lowering registers them.
func (v *MllamaVision) tensors(fn tensorFn) {
	d, p, t, r := v.Dim, v.tokens(), v.Tiles, v.AspectRatios+1
	fn("vision_model.patch_embedding.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("vision_model.pre_tile_positional_embedding.embedding.weight", []int64{r, t * d}, core.RoleEmbed)
	fn("vision_model.pre_tile_positional_embedding.gate", []int64{1}, core.RoleNorm)
	fn("vision_model.class_embedding", []int64{d}, core.RoleEmbed)
	fn("vision_model.gated_positional_embedding.gate", []int64{1}, core.RoleNorm)
	fn("vision_model.gated_positional_embedding.embedding", []int64{p, d}, core.RoleEmbed)
	fn("vision_model.gated_positional_embedding.tile_embedding.weight", []int64{r, t * p * d}, core.RoleEmbed)
	fn("vision_model.layernorm_pre.weight", []int64{d}, core.RoleNorm)
	fn("vision_model.layernorm_pre.bias", []int64{d}, core.RoleNorm)
	layer := func(prefix string, gated bool) {
		encoderLayerTensors(fn, prefix, llamaEncoderLayer, d, v.Inter, false)
		if gated {
			fn(prefix+"gate_attn", []int64{1}, core.RoleNorm)
			fn(prefix+"gate_ffn", []int64{1}, core.RoleNorm)
		}
	}
	for i := int64(0); i < v.Layers; i++ {
		layer("vision_model.transformer.layers."+core.Itoa(i)+".", false)
	}
	fn("vision_model.layernorm_post.weight", []int64{d}, core.RoleNorm)
	fn("vision_model.layernorm_post.bias", []int64{d}, core.RoleNorm)
	fn("vision_model.post_tile_positional_embedding.embedding.weight", []int64{r, t * d}, core.RoleEmbed)
	fn("vision_model.post_tile_positional_embedding.gate", []int64{1}, core.RoleNorm)
	for i := int64(0); i < v.GlobalLayers; i++ {
		layer("vision_model.global_transformer.layers."+core.Itoa(i)+".", true)
	}
	fn("multi_modal_projector.weight", []int64{v.TextDim, v.OutputDim}, core.RoleLinear)
	fn("multi_modal_projector.bias", []int64{v.TextDim}, core.RoleLinear)
}

// Params: the vision model and the projector.
func (v *MllamaVision) Params() int64 { return countTensors(v.tensors, "") }

func (v *MllamaVision) Summary() string {
	return fmt.Sprintf("%d+%d layers of %d, %d heads, %d tiles of %d px, patch %d, -> %d", v.Layers, v.GlobalLayers, v.Dim, v.Heads, v.Tiles, v.Image, v.Patch, v.TextDim)
}

func (v *MllamaVision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldTiles, v.Tiles}, sized{FieldInChans, v.Channels},
		sized{FieldOutputDim, v.OutputDim}, sized{FieldAspects, v.AspectRatios}, sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if v.GlobalLayers < 0 {
		return fieldErr(path, FieldGlobalLayers, fmt.Sprintf(" must not be negative (got %d)", v.GlobalLayers))
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 20}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldGlobalLayers, v.GlobalLayers, 1 << 12}, bounded{FieldTiles, v.Tiles, 1 << 8}, bounded{FieldInChans, v.Channels, 1 << 6},
		bounded{FieldImage, v.Image, 1 << 14}, bounded{FieldAspects, v.AspectRatios, 1 << 12}, bounded{FieldOutputDim, v.OutputDim, 1 << 24}); err != nil {
		return err
	}
	if v.Patch > v.Image {
		return fieldErr(path, FieldPatch, fmt.Sprintf(" (%d) is larger than ", v.Patch), FieldImage, fmt.Sprintf(" (%d)", v.Image))
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	for _, i := range v.Intermediate {
		if i < 0 || i >= v.Layers {
			return fieldErr(path, FieldIntermediate, fmt.Sprintf(" names layer %d, not in 0..%d", i, v.Layers-1))
		}
	}
	if want := v.Dim * int64(len(v.Intermediate)+1); v.OutputDim != want {
		return fieldErr(path, FieldOutputDim, fmt.Sprintf(" is %d, but the last hidden state and %d intermediate layers of %d concatenate to %d", v.OutputDim, len(v.Intermediate), v.Dim, want)).
			withHint(FieldOutputDim, " must be ", FieldDim, " x (1 + the number of ", FieldIntermediate, ")")
	}
	return checkMllamaImpl(path, v.Impl)
}

// checkMllamaImpl: transformers' Llama 3.2 Vision passes 4-D additive
// masks to every attention, which memsh models with SDPA only.
func checkMllamaImpl(path, impl string) error {
	switch impl {
	case "sdpa":
		return nil
	case "flash", "eager":
		return &units.Error{Path: path, Msg: fmt.Sprintf("Llama 3.2 Vision with %s attention is not modelled", impl),
			Hint: "its vision and cross-attention layers take 4-D additive masks; use attn=\"sdpa\""}
	}
	return units.Errorf(path, "unknown attention impl %q (known: sdpa)", impl)
}

// CheckLayout: the image states and masks live in one lowering, so the
// vision model and the cross-attention layers run on one GPU's replica.
func (v *MllamaVision) CheckLayout(path string, par core.Parallelism) error {
	return checkMllamaLayout(path, par)
}

func checkMllamaLayout(path string, par core.Parallelism) error {
	return dataParallelOnly(path, "Llama 3.2 Vision", par, "use dp, fsdp or zero; its tensor, pipeline and context splits are not modelled")
}

// registerIdle registers the weights when no image runs.
func (v *MllamaVision) registerIdle(b *core.Builder) {
	registerTensors(b, v.Layers*12+v.GlobalLayers*14+20, v.tensors)
}

// BlockPaths are the vision model's MllamaVisionEncoderLayers, local and
// global (FSDP units: core.BlockLister).
func (v *MllamaVision) BlockPaths() []string {
	return append(numbered("vision_model.transformer.layers", v.Layers), numbered("vision_model.global_transformer.layers", v.GlobalLayers)...)
}
