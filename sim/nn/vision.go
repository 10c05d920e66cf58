package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// VisionTower is a ViT image encoder whose image tokens join the text
// sequence, as transformers' Qwen2.5-VL runs it
// (Qwen2_5_VisionTransformerPretrainedModel and
// Qwen2_5_VLModel.get_image_features):
//
//   - each image, resized to a multiple of patch*merge pixels a side
//     (dynamic resolution: its size decides its tokens), is cut into
//     patch x patch x temporal patches, flattened, and embedded by
//     patch_embed (a Conv3d, lowered as the matmul it is);
//   - depth pre-norm blocks of attention (qkv and proj with biases, 2-D
//     rotary embeddings, not causal) and a gated SiLU MLP with biases. The
//     blocks in FullBlocks attend within their image; the others within
//     windows of window/patch patches a side (window attention);
//   - the merger: an RMS norm, merge x merge neighbouring patches
//     concatenated (a view), two linears with GELU between: one image token
//     per merge² patches, in the language model's width;
//   - the image tokens replace the image placeholders of the text
//     embeddings (inputs_embeds.masked_scatter, a new tensor; its backward
//     keeps the placeholder mask).
//
// Qwen2-VL's tower (Qwen2VisionTransformerPretrainedModel, Qwen2VL set)
// differs in its blocks and merger only: LayerNorms with biases (norm1,
// norm2, merger.ln_q) for the RMS norms, an fc1/fc2 MLP of Act with biases
// for the gated one, and every block attending within its image, so the
// patches keep the processor's order (no window index copies).
//
// All images of a micro-batch run as one packed sequence: flash-attn's
// varlen kernel over every chunk (an image, a window) at once, or, with
// sdpa, one kernel per chunk whose outputs are concatenated (a copy o_proj
// saves: Attention.ChunkCat). Eager attention is not modelled (transformers
// runs it per chunk, each with its own score matrix). The patches are put
// in window order before the blocks and the image tokens back in image
// order after the merger (two index copies, each saving its int64
// indices), and the 2-D rotary tables (cos and sin, fp32, [patches,
// head_dim]) are computed once a step and saved by every block's rope
// (vision_lower.go). The images come from train(images=(count, height,
// width)), the videos from train(videos=...), each group of
// temporal_patch_size frames run as an image (vision_video.go); without
// either the tower's weights are registered and nothing runs.
type VisionTower struct {
	Name       string
	Dim        int64 // hidden_size
	Depth      int64
	Heads      int64
	Inter      int64 // the MLP's intermediate size
	Patch      int64 // patch_size
	Temporal   int64 // temporal_patch_size
	InChans    int64
	Merge      int64 // spatial_merge_size
	TextDim    int64 // out_hidden_size: the language model's width
	Window     int64 // window_size in pixels; 0 = every block attends to its whole image
	FullBlocks []int64
	Impl       string
	Qwen2VL    bool   // Qwen2-VL's blocks and merger (above)
	Act        string // Qwen2-VL's MLP activation (hidden_act: quick_gelu)
}

func (v *VisionTower) Kind() string           { return "vision_tower" }
func (v *VisionTower) Label() string          { return v.Name }
func (v *VisionTower) DefaultName() string    { return "visual" }
func (v *VisionTower) Children() []core.Layer { return nil }
func (v *VisionTower) InDim() int64           { return v.TextDim }
func (v *VisionTower) OutDim() int64          { return v.TextDim }
func (v *VisionTower) ReadsImages() bool      { return true }
func (v *VisionTower) ReadsVideos() bool      { return true }

func (v *VisionTower) patchIn() int64 { return v.InChans * v.Temporal * v.Patch * v.Patch }
func (v *VisionTower) mergedDim() int64 {
	return v.Dim * v.Merge * v.Merge
}

// norm is the block's norm named name.
func (v *VisionTower) norm(name string) *Norm {
	return &Norm{Name: name, Dim: v.Dim, RMS: !v.Qwen2VL, Bias: v.Qwen2VL}
}

// mlp is the block's MLP: gated SiLU (Qwen2.5-VL's gate_proj, up_proj,
// down_proj) or Qwen2-VL's fc1, Act, fc2; biases in both.
func (v *VisionTower) mlp() *MLP {
	if v.Qwen2VL {
		return &MLP{Name: "mlp", Dim: v.Dim, Hidden: v.Inter, Act: v.Act, Bias: true}
	}
	return &MLP{Name: "mlp", Dim: v.Dim, Hidden: v.Inter, Act: "swiglu", Bias: true}
}

// Params: patch_embed, the blocks (two norms, qkv and proj with biases,
// the MLP), the merger (ln_q, two linears with biases); the tensors
// lists them one by one (a formula: Params runs before Validate bounds
// the depth).
func (v *VisionTower) Params() int64 {
	d, m := v.Dim, v.mergedDim()
	norm := d
	if v.Qwen2VL {
		norm = 2 * d
	}
	block := 2*norm + (3*d*d + 3*d) + (d*d + d) + v.mlp().Params()
	return d*v.patchIn() + v.Depth*block + norm + (m*m + m) + (m*v.TextDim + v.TextDim)
}

func (v *VisionTower) Summary() string {
	return fmt.Sprintf("%d blocks of %d, %d heads, patch %d, merge %d, window %d, -> %d", v.Depth, v.Dim, v.Heads, v.Patch, v.Merge, v.Window, v.TextDim)
}

func (v *VisionTower) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Depth}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldPatch, v.Patch}, sized{FieldTemporal, v.Temporal}, sized{FieldInChans, v.InChans}, sized{FieldMerge, v.Merge},
		sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if v.Window > 0 && v.Window < v.Patch*v.Merge {
		return fieldErr(path, FieldWindow, fmt.Sprintf(" (%d pixels) must be at least ", v.Window), FieldPatch, " x ", FieldMerge, fmt.Sprintf(" (%d)", v.Patch*v.Merge))
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 20}, bounded{FieldPatch, v.Patch, 1 << 10},
		bounded{FieldMerge, v.Merge, 1 << 6}, bounded{FieldTemporal, v.Temporal, 1 << 6}, bounded{FieldInChans, v.InChans, 1 << 6}); err != nil {
		return err
	}
	if v.Qwen2VL {
		if v.Window > 0 {
			return fieldErr(path, FieldWindow, fmt.Sprintf(" (%d pixels): Qwen2-VL's blocks attend within their whole image", v.Window))
		}
		if err := v.mlp().Validate(path); err != nil {
			return err
		}
	}
	for _, i := range v.FullBlocks {
		if i < 0 || i >= v.Depth {
			return fieldErr(path, FieldFullBlocks, fmt.Sprintf(" names block %d, not in 0..%d", i, v.Depth-1))
		}
	}
	return checkChunkedImpl(path, v.Impl, "window")
}

// grid is the patches of one image a side (visionGrid).
func (v *VisionTower) grid(pixels int64) int64 { return visionGrid(pixels, v.Patch, v.Merge) }

// windowSquares is the sum of the squared sides, in patches, of the
// attention windows along one side of an image of g patches: transformers'
// get_window_index (Qwen2_5_VisionTransformerPretrainedModel) tiles the
// merged grid (g/merge units) with windows of window/merge/patch units, the
// last one cut short.
func (v *VisionTower) windowSquares(g int64) int64 {
	unit := v.Window / v.Merge / v.Patch
	gm := g / v.Merge
	side, last := v.Merge*unit, v.Merge*(gm%unit)
	return (gm/unit)*side*side + last*last
}

// windowKeys is the keys each patch of an image of gh x gw patches attends
// to on average in a window block: the sum over its windows of their
// patches squared, over its patches (exact FLOPs when the windows differ).
func (v *VisionTower) windowKeys(gh, gw int64) int64 {
	perImage := gh * gw
	return (v.windowSquares(gh)*v.windowSquares(gw) + perImage - 1) / perImage
}

// ImageTokens is the tokens one image of h x w pixels adds to a sample.
func (v *VisionTower) ImageTokens(h, w int64) int64 {
	return v.grid(h) * v.grid(w) / (v.Merge * v.Merge)
}

// BlockPaths are the tower's blocks, Qwen2_5_VLVisionBlock (FSDP units:
// core.BlockLister).
func (v *VisionTower) BlockPaths() []string {
	return numbered(core.ModuleName(v)+".blocks", v.Depth)
}

// numbered is path.0 ... path.(n-1).
func numbered(path string, n int64) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = path + "." + core.Itoa(int64(i))
	}
	return out
}
