package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// KimiVision is Kimi K2.5's vision tower (MoonViT) and its projector, as
// transformers 5.25 (IndexAddMerge) and 5.17 run them (Kimi_K25VisionModel and
// Kimi_K25MultimodalProjection in models/kimi_k25/modeling_kimi_k25.py),
// named as its module tree: vision_tower and mm_projector beside
// language_model.
//
//   - the processor (Kimi_K25ImageProcessor) scales each image down to
//     at most MaxPatches patches and MaxSide patches a side (navit_resize;
//     never up) and pads it to a multiple of Patch x Merge pixels
//     (KimiGrid); the patches come in the model's dtype
//     (patch_embed.proj, a Conv2d with bias lowered as the matmul it is,
//     takes them as they come: a bf16 model needs bf16 pixels);
//   - patch_embed.pos_emb: the learned PosH x PosW grid resampled to the
//     image's grid, bicubic, as one F.embedding_bag of 16 taps a patch
//     (it saves the int64 taps, offsets, bag sizes and max indices and the
//     taps' weights in the table's dtype), plus the temporal sinusoid's
//     zero row for an image (time_position_embeddings, an fp32 buffer);
//   - Layers encoder layers (norm1, attn: q_proj, k_proj, v_proj and proj
//     with biases, the 2-D axial rotary embedding in fp32, each image
//     attended to as a whole; norm2, mlp.fc1, act, mlp.fc2 with biases),
//     final_layernorm;
//   - the merge (temporalMerge): Merge x Merge neighbouring patches side
//     by side, averaged over the image's single frame: from 5.24 an fp32
//     index_add_ of the frame-weighted patches, before it an index copy
//     and a mean;
//   - mm_projector: pre_norm (a LayerNorm over the tower's width, of
//     projection_hidden_size, which must be it), the Merge² patches side
//     by side (a view), in_proj, GELU, out_proj to the text width; the
//     image tokens replace the placeholders of the text embeddings
//     (masked_scatter; its backward keeps the mask).
//
// All images of a micro-batch run as one packed sequence: flash-attn's
// varlen kernel, or, with sdpa, one kernel per image whose outputs are
// concatenated (Attention.ChunkCat). The rotary tables (cos and sin,
// fp32, [patches, head_dim]) are computed once a step and saved by every
// layer's rope. Videos are not modelled. The images come from
// train(images=(count, height, width)); without them the weights are
// registered and nothing runs.
type KimiVision struct {
	Dim        int64 // vision hidden_size
	Layers     int64 // num_hidden_layers
	Heads      int64 // num_attention_heads
	Inter      int64 // intermediate_size
	Act        string
	Patch      int64 // patch_size
	PosH, PosW int64 // pos_emb_height, pos_emb_width: the learned grid
	PosTime    int64 // pos_emb_time: the temporal sinusoid's frames
	Merge      int64 // merge_kernel_size (square)
	ProjDim    int64 // projection_hidden_size: pre_norm's width
	TextDim    int64 // the text model's hidden_size
	MaxPatches int64 // the processor's max_patches
	MaxSide    int64 // the processor's size["max_height"], in patches
	Impl       string
	// IndexAddMerge pools the merged patches as transformers 5.24 and
	// later do (Kimi_K25VisionModel.temporal_merge: index_add_ of the
	// fp32 frame-weighted patches); false, as 5.17.0 to 5.23.0 (the
	// merge_index gather and a mean). temporalMerge lowers both.
	IndexAddMerge bool
}

// The Fields KimiVision's checks name beside the shared ones.
const (
	FieldPosHeight  Field = "position grid height"
	FieldPosWidth   Field = "position grid width"
	FieldPosTime    Field = "position frames"
	FieldProjDim    Field = "projector norm width"
	FieldMaxPatches Field = "patches an image"
	FieldMaxSide    Field = "patches an image's side"
)

// kimiTaps is the bicubic kernel's taps a patch (4 x 4).
const kimiTaps = 16

func (v *KimiVision) Kind() string              { return "kimi_vision" }
func (v *KimiVision) Label() string             { return "" }
func (v *KimiVision) DefaultName() string       { return "" } // vision_tower and mm_projector name themselves
func (v *KimiVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *KimiVision) Children() []core.Layer    { return nil }
func (v *KimiVision) InDim() int64              { return v.TextDim }
func (v *KimiVision) OutDim() int64             { return v.TextDim }
func (v *KimiVision) ReadsImages() bool         { return true }

// VideosRefused says why Kimi K2.5's videos are refused: its video path
// (transformers 5.25.0, models/kimi_k25) is not the images' one.
// Kimi_K25VideoProcessor cuts each video into chunks of
// temporal_patch_size (4) frames, each a grid of t x h x w patches
// (video_processing_kimi_k25.py _preprocess); MoonViT attends over a
// chunk's frames together (get_vision_attention_seqlens with
// merge_temporal=True), adds each frame's temporal position embedding
// (get_vision_frame_index) and pools the chunk's frames into one frame's
// tokens (temporal_merge, frame weights 1 / t); the processor writes a
// timestamp and media tags around each chunk (replace_video_token).
func (v *KimiVision) VideosRefused() (why, hint string) {
	return "Kimi K2.5's video processor cuts each video into chunks of 4 frames that MoonViT attends to together, " +
			"with temporal position embeddings, and pools into one frame's tokens (transformers 5.25.0, models/kimi_k25); memsh models its images only",
		"leave videos= out; images=(count, height, width) runs each frame as its own image (attention within a frame, " +
			"4 times a chunk's tokens): not the video path's memory or tokens"
}

func (v *KimiVision) patchIn() int64   { return 3 * v.Patch * v.Patch }
func (v *KimiVision) mergedDim() int64 { return v.Dim * v.Merge * v.Merge }
func (v *KimiVision) headDim() int64   { return v.Dim / v.Heads }

// tensors lists the parameters, as the lowering registers them.
func (v *KimiVision) tensors(fn tensorFn) {
	d, m := v.Dim, v.mergedDim()
	fn("vision_tower.patch_embed.proj.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("vision_tower.patch_embed.proj.bias", []int64{d}, core.RoleConv)
	fn("vision_tower.patch_embed.pos_emb.position_embeddings", []int64{v.PosH, v.PosW, d}, core.RoleEmbed)
	for i := int64(0); i < v.Layers; i++ {
		encoderLayerTensors(fn, "vision_tower.layers."+core.Itoa(i)+".", kimiEncoderLayer, d, v.Inter, true)
	}
	fn("vision_tower.final_layernorm.weight", []int64{d}, core.RoleNorm)
	fn("vision_tower.final_layernorm.bias", []int64{d}, core.RoleNorm)
	fn("mm_projector.pre_norm.weight", []int64{v.ProjDim}, core.RoleNorm)
	fn("mm_projector.pre_norm.bias", []int64{v.ProjDim}, core.RoleNorm)
	fn("mm_projector.in_proj.weight", []int64{m, m}, core.RoleLinear)
	fn("mm_projector.in_proj.bias", []int64{m}, core.RoleLinear)
	fn("mm_projector.out_proj.weight", []int64{v.TextDim, m}, core.RoleLinear)
	fn("mm_projector.out_proj.bias", []int64{v.TextDim}, core.RoleLinear)
}

// Params: the vision tower and the projector.
func (v *KimiVision) Params() int64 { return countTensors(v.tensors, "") }

// TowerParams is the vision tower's share of Params (the rest is
// mm_projector's).
func (v *KimiVision) TowerParams() int64 { return countTensors(v.tensors, "vision_tower.") }

func (v *KimiVision) Summary() string {
	return fmt.Sprintf("%d layers of %d, %d heads, patch %d, merge %d, -> %d", v.Layers, v.Dim, v.Heads, v.Patch, v.Merge, v.TextDim)
}

func (v *KimiVision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldPatch, v.Patch}, sized{FieldPosHeight, v.PosH}, sized{FieldPosWidth, v.PosW}, sized{FieldPosTime, v.PosTime},
		sized{FieldMerge, v.Merge}, sized{FieldProjDim, v.ProjDim}, sized{FieldTextDim, v.TextDim},
		sized{FieldMaxPatches, v.MaxPatches}, sized{FieldMaxSide, v.MaxSide}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldMerge, v.Merge, 1 << 6}, bounded{FieldPosHeight, v.PosH, 1 << 12},
		bounded{FieldPosWidth, v.PosW, 1 << 12}, bounded{FieldPosTime, v.PosTime, 1 << 12}, bounded{FieldTextDim, v.TextDim, 1 << 20},
		bounded{FieldMaxPatches, v.MaxPatches, 1 << 24}, bounded{FieldMaxSide, v.MaxSide, 1 << 16}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 || v.headDim()%4 != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d) into heads of a multiple of 4", v.Dim)).
			withHint("Kimi_K25VisionRotaryEmbedding rotates a quarter of each head by the row, a quarter by the column, twice")
	}
	if v.ProjDim != v.Dim {
		return fieldErr(path, FieldProjDim, fmt.Sprintf(" (%d) must be ", v.ProjDim), FieldDim, fmt.Sprintf(" (%d)", v.Dim)).
			withHint("mm_projector.pre_norm normalises the tower's merged patches, each of the tower's width")
	}
	return checkChunkedImpl(path, v.Impl, "image")
}

// KimiGrid is the patches a side of an image of h x w pixels as
// Kimi_K25ImageProcessor makes it (navit_resize, 5.17.0): scaled by the
// least of 1, sqrt(maxPatches / (h/patch * w/patch)) and maxSide*patch
// over each side (floats as Python computes them, the sizes truncated),
// then padded to a multiple of patch*merge pixels.
func KimiGrid(h, w, patch, merge, maxPatches, maxSide int64) (gh, gw int64) {
	nh, nw := max(float64(h/patch), 1), max(float64(w/patch), 1)
	scale := min(1, math.Sqrt(float64(maxPatches)/(nh*nw)), float64(maxSide*patch)/float64(h), float64(maxSide*patch)/float64(w))
	side := func(px int64) int64 {
		n := min(max(int64(float64(px)*scale), 1), maxSide*patch)
		f := patch * merge
		return (n + f - 1) / f * f / patch
	}
	return side(h), side(w)
}

// grid is KimiGrid at the tower's sizes.
func (v *KimiVision) grid(h, w int64) (int64, int64) {
	return KimiGrid(h, w, v.Patch, v.Merge, v.MaxPatches, v.MaxSide)
}

// ImageTokens is the tokens one image of h x w pixels adds to a sample.
func (v *KimiVision) ImageTokens(h, w int64) int64 {
	gh, gw := v.grid(h, w)
	return gh * gw / (v.Merge * v.Merge)
}

// registerIdle registers the weights and the buffer when no image runs.
func (v *KimiVision) registerIdle(b *core.Builder) {
	registerTensors(b, v.Layers*16+11, v.tensors)
	v.timeBuffer(b, "vision_tower.patch_embed.pos_emb.")
}

// timeBuffer is Kimi_K25VisionPositionEmbeddings' time_position_embeddings:
// the sinusoid of pos_emb_time frames after a zero row, fp32.
func (v *KimiVision) timeBuffer(b *core.Builder, prefix string) {
	b.Buffer(prefix+"time_position_embeddings", []int64{v.PosTime + 1, v.Dim}, units.FP32,
		"the temporal sinusoid (a non-persistent fp32 buffer; an image adds its zero row)")
}

// BlockPaths are the tower's Kimi_K25VisionEncoderLayers (FSDP units:
// core.BlockLister).
func (v *KimiVision) BlockPaths() []string {
	return numbered("vision_tower.layers", v.Layers)
}
