package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
)

// PixtralVision is the vision tower of Mistral Small 3.1 and 3.2
// (PixtralVisionModel, models/pixtral/modeling_pixtral.py) and their
// multi-modal projector (Mistral3MultiModalProjector,
// models/mistral3/modeling_mistral3.py), as transformers 5.25.0 runs them,
// named as its module tree: vision_tower and multi_modal_projector beside
// language_model.
//
//   - the processor (PixtralProcessor) scales each image down so that its
//     longer side is at most Image pixels (never up; floor), then rounds
//     each side up to a multiple of Patch x Merge pixels (PixtralGrid);
//     the pixel values come in fp32 and the tower casts them to its
//     weights' dtype (a bf16 model keeps a bf16 copy, which the
//     convolution saves);
//   - patch_conv, a Conv2d of Patch x Patch without bias (lowered as the
//     matmul it is), its patches of every image flattened into one
//     sequence (torch.cat, a copy), ln_pre (an RMSNorm);
//   - the 2-D rotary embedding (PixtralVisionRotaryEmbedding): cos and sin
//     of each patch's row and column, [patches, head_dim] in the hidden
//     states' dtype, made once a forward and saved by every layer's rope;
//   - Layers PixtralAttentionLayers: attention_norm (RMSNorm), attention
//     (q_proj, k_proj, v_proj, o_proj without biases, not causal);
//     ffn_norm (RMSNorm), feed_forward (gate_proj, up_proj, down_proj
//     without biases: a gated MLP of Act);
//   - multi_modal_projector: norm (an RMSNorm over the tower's width), the
//     patch merger (F.unfold of Merge x Merge neighbouring patches of each
//     image, then torch.cat, two copies; merging_layer, Merge² x Dim to
//     Dim without bias, saves the second), linear_1, ProjAct, linear_2
//     (with biases when ProjBias) to the text width; the image tokens are
//     concatenated (torch.cat, a copy) and replace the placeholders of the
//     text embeddings (masked_scatter; its backward keeps the mask).
//
// With Llava (mistral-community/pixtral-12b, LlavaForConditionalGeneration)
// the projector is LLaVA's: linear_1, ProjAct, linear_2 on the last
// layer's hidden state, no norm, no merger, Merge 1.
//
// All images of a micro-batch run as one sequence of all their patches.
// Under SDPA and eager attention each image attends only to itself through
// one block-diagonal additive mask, [1, 1, patches, patches] in the hidden
// states' dtype (generate_block_attention_mask), made once a forward and
// handed to every layer; SDPA's efficient kernel computes every block of
// it and saves it, and on CUDA first pads a copy of it to a multiple of 8
// keys when the patches are not one (preprocess_mask); eager attention
// adds it to one score matrix over every image's patches a layer.
// flash-attn gets no mask: its varlen kernel runs image by image.
// The images come from train(images=(count, height, width)); without them
// the weights are registered and nothing runs.
type PixtralVision struct {
	Dim      int64 // vision hidden_size
	Layers   int64 // num_hidden_layers
	Heads    int64 // num_attention_heads
	Inter    int64 // intermediate_size
	Act      string
	Image    int64 // image_size: the processor's longest edge
	Patch    int64 // patch_size
	Channels int64 // num_channels
	Merge    int64 // spatial_merge_size
	TextDim  int64 // the text model's hidden_size
	ProjAct  string
	ProjBias bool // multimodal_projector_bias
	// Llava is LLaVA's projector (LlavaMultiModalProjector in
	// models/llava/modeling_llava.py, 5.25.0; mistral-community/pixtral-12b):
	// linear_1, ProjAct, linear_2 on the tower's last hidden state, with no
	// norm and no patch merger: every patch is an image token (Merge 1)
	Llava bool
	Impl  string
}

func (v *PixtralVision) Kind() string              { return "pixtral_vision" }
func (v *PixtralVision) Label() string             { return "" }
func (v *PixtralVision) DefaultName() string       { return "" } // vision_tower and multi_modal_projector name themselves
func (v *PixtralVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *PixtralVision) Children() []core.Layer    { return nil }
func (v *PixtralVision) InDim() int64              { return v.TextDim }
func (v *PixtralVision) OutDim() int64             { return v.TextDim }
func (v *PixtralVision) ReadsImages() bool         { return true }

func (v *PixtralVision) patchIn() int64   { return v.Channels * v.Patch * v.Patch }
func (v *PixtralVision) mergedDim() int64 { return v.Dim * v.Merge * v.Merge }
func (v *PixtralVision) headDim() int64   { return v.Dim / v.Heads }

// tensors lists the parameters, as the lowering registers them.
func (v *PixtralVision) tensors(fn tensorFn) {
	d, t := v.Dim, v.TextDim
	fn("vision_tower.patch_conv.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("vision_tower.ln_pre.weight", []int64{d}, core.RoleNorm)
	for i := int64(0); i < v.Layers; i++ {
		p := "vision_tower.transformer.layers." + core.Itoa(i) + "."
		fn(p+"attention_norm.weight", []int64{d}, core.RoleNorm)
		fn(p+"feed_forward.gate_proj.weight", []int64{v.Inter, d}, core.RoleGate)
		fn(p+"feed_forward.up_proj.weight", []int64{v.Inter, d}, core.RoleUp)
		fn(p+"feed_forward.down_proj.weight", []int64{d, v.Inter}, core.RoleDown)
		fn(p+"attention.k_proj.weight", []int64{d, d}, core.RoleK)
		fn(p+"attention.v_proj.weight", []int64{d, d}, core.RoleV)
		fn(p+"attention.q_proj.weight", []int64{d, d}, core.RoleQ)
		fn(p+"attention.o_proj.weight", []int64{d, d}, core.RoleO)
		fn(p+"ffn_norm.weight", []int64{d}, core.RoleNorm)
	}
	if !v.Llava {
		fn("multi_modal_projector.norm.weight", []int64{d}, core.RoleNorm)
		fn("multi_modal_projector.patch_merger.merging_layer.weight", []int64{d, v.mergedDim()}, core.RoleLinear)
	}
	fn("multi_modal_projector.linear_1.weight", []int64{t, d}, core.RoleLinear)
	if v.ProjBias {
		fn("multi_modal_projector.linear_1.bias", []int64{t}, core.RoleLinear)
	}
	fn("multi_modal_projector.linear_2.weight", []int64{t, t}, core.RoleLinear)
	if v.ProjBias {
		fn("multi_modal_projector.linear_2.bias", []int64{t}, core.RoleLinear)
	}
}

// Params: the vision tower and the projector.
func (v *PixtralVision) Params() int64 { return countTensors(v.tensors, "") }

// TowerParams is the vision tower's share of Params (the rest is
// multi_modal_projector's).
func (v *PixtralVision) TowerParams() int64 { return countTensors(v.tensors, "vision_tower.") }

// tensorCount is the parameters' tensors.
func (v *PixtralVision) tensorCount() int64 {
	var n int64
	v.tensors(func(string, []int64, core.Role) { n++ })
	return n
}

func (v *PixtralVision) Summary() string {
	return fmt.Sprintf("%d layers of %d, %d heads, patch %d, merge %d, images up to %d px, -> %d", v.Layers, v.Dim, v.Heads, v.Patch, v.Merge, v.Image, v.TextDim)
}

func (v *PixtralVision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldMerge, v.Merge},
		sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldImage, v.Image, 1 << 16}, bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldInChans, v.Channels, 1 << 6},
		bounded{FieldMerge, v.Merge, 1 << 6}, bounded{FieldTextDim, v.TextDim, 1 << 20}); err != nil {
		return err
	}
	if v.Llava && v.Merge != 1 {
		return fieldErr(path, FieldMerge, fmt.Sprintf(" is %d: LLaVA's projector merges no patches (1)", v.Merge))
	}
	if v.Dim%v.Heads != 0 || v.headDim()%4 != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d) into heads of a multiple of 4", v.Dim)).
			withHint("PixtralVisionRotaryEmbedding rotates a quarter of each head by the patch's row, a quarter by its column, twice")
	}
	switch v.Impl {
	case "flash", "sdpa", "eager":
		return nil
	}
	return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa, eager)", v.Impl))
}

// PixtralGrid is the patches a side of an image of h x w pixels as
// PixtralProcessor makes it (get_resize_output_image_size in
// models/pixtral/image_processing_pixtral.py, 5.25.0, with the patch
// size PixtralProcessor._process_images sets, patch x merge): scaled by
// max(h, w) / longest when that is over 1, each side floored, then rounded
// up to a multiple of patch x merge pixels. An image scaled to less than
// a pixel a side has no patches there (0).
func PixtralGrid(h, w, longest, patch, merge int64) (gh, gw int64) {
	ratio := max(float64(h)/float64(longest), float64(w)/float64(longest))
	if ratio > 1 {
		h, w = int64(math.Floor(float64(h)/ratio)), int64(math.Floor(float64(w)/ratio))
	}
	f := patch * merge
	side := func(px int64) int64 {
		if px <= 0 {
			return 0
		}
		return (px + f - 1) / f * merge
	}
	return side(h), side(w)
}

// grid is PixtralGrid at the tower's sizes.
func (v *PixtralVision) grid(h, w int64) (int64, int64) {
	return PixtralGrid(h, w, v.Image, v.Patch, v.Merge)
}

// ImageTokens is the placeholders ([IMG]) one image of h x w pixels has
// in the text: one a merged patch.
func (v *PixtralVision) ImageTokens(h, w int64) int64 {
	gh, gw := v.grid(h, w)
	return gh * gw / (v.Merge * v.Merge)
}

// TextTokens is the tokens one image of h x w pixels adds to the text:
// its placeholders and one [IMG_BREAK] a row of merged patches, the last
// one [IMG_END] (PixtralProcessor.replace_image_token).
func (v *PixtralVision) TextTokens(h, w int64) int64 {
	gh, _ := v.grid(h, w)
	return v.ImageTokens(h, w) + gh/v.Merge
}

// registerIdle registers the weights when no image runs.
func (v *PixtralVision) registerIdle(b *core.Builder) {
	registerTensors(b, v.tensorCount(), v.tensors)
}

// BlockPaths are the tower's PixtralAttentionLayers (FSDP units:
// core.BlockLister).
func (v *PixtralVision) BlockPaths() []string {
	return numbered("vision_tower.transformer.layers", v.Layers)
}
