package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
)

// Qwen3VisionTower is the vision tower of Qwen3-VL and Qwen3.5, as
// transformers 5.17 runs it (Qwen3VLVisionModel, Qwen3_5VisionModel and
// Qwen3VLModel.get_image_features), named as its module tree
// (model.visual):
//
//   - each image, resized to a multiple of patch*merge pixels a side, is
//     cut into patch x patch x temporal patches and embedded by
//     patch_embed.proj (a Conv3d with bias, lowered as the matmul it is);
//   - pos_embed, a learned square grid of num_position_embeddings
//     positions, is resampled to each image's grid (bilinear: four taps per
//     patch, their int64 indices and fp32 weights computed from the grid,
//     the looked-up rows times the weights summed in fp32) and added;
//   - depth pre-norm blocks (LayerNorm with bias): attention (qkv and proj
//     with biases, 2-D rotary embeddings, each image attended to as a whole)
//     and an MLP linear_fc1, act, linear_fc2 with biases;
//   - the merger: a LayerNorm, merge x merge neighbouring patches side by
//     side (a view), linear_fc1, GELU, linear_fc2: one image token per
//     merge² patches, in the language model's width;
//   - DeepStack (Qwen3-VL; Qwen3.5 has none): after each block in
//     Deepstack, deepstack_merger_list.j merges that block's output (its
//     LayerNorm over the merged width) into features that are added to
//     the text hidden states at the image positions after decoder layer j
//     (DeepstackAdd).
//
// The image tokens replace the image placeholders of the text embeddings
// (masked_scatter) as in Qwen2.5-VL. All images of a micro-batch run as one
// packed sequence: flash-attn's varlen kernel, or, with sdpa, one kernel
// per image whose outputs are concatenated (Attention.ChunkCat). The
// rotary tables (cos and sin, fp32, [patches, head_dim]) are computed once
// a step and saved by every block's rope. The images come from
// train(images=(count, height, width)), the videos from train(videos=...),
// each group of temporal_patch_size frames run as an image, after the
// timestamps the processor writes (vision_video.go); without either the
// tower's weights are registered and nothing runs.
type Qwen3VisionTower struct {
	Name      string
	Dim       int64 // hidden_size
	Depth     int64
	Heads     int64
	Inter     int64 // the MLP's intermediate size
	Act       string
	Patch     int64 // patch_size
	Temporal  int64 // temporal_patch_size
	InChans   int64
	Merge     int64 // spatial_merge_size
	TextDim   int64 // out_hidden_size: the language model's width
	Positions int64 // num_position_embeddings: a square grid
	Deepstack []int64
	Impl      string
}

func (v *Qwen3VisionTower) Kind() string           { return "qwen3_vision_tower" }
func (v *Qwen3VisionTower) Label() string          { return v.Name }
func (v *Qwen3VisionTower) DefaultName() string    { return "visual" }
func (v *Qwen3VisionTower) Children() []core.Layer { return nil }
func (v *Qwen3VisionTower) InDim() int64           { return v.TextDim }
func (v *Qwen3VisionTower) OutDim() int64          { return v.TextDim }
func (v *Qwen3VisionTower) ReadsImages() bool      { return true }
func (v *Qwen3VisionTower) ReadsVideos() bool      { return true }

func (v *Qwen3VisionTower) patchIn() int64   { return v.InChans * v.Temporal * v.Patch * v.Patch }
func (v *Qwen3VisionTower) mergedDim() int64 { return v.Dim * v.Merge * v.Merge }

// blockParams is one block: two LayerNorms with biases, qkv and proj with
// biases, linear_fc1 and linear_fc2 with biases.
func (v *Qwen3VisionTower) blockParams() int64 {
	d := v.Dim
	return 4*d + (3*d*d + 3*d) + (d*d + d) + (d*v.Inter + v.Inter) + (v.Inter*d + d)
}

// mergerParams is one patch merger: its LayerNorm (over the merged width
// when post is set, the deepstack mergers' use_postshuffle_norm), two
// linears with biases.
func (v *Qwen3VisionTower) mergerParams(post bool) int64 {
	m, n := v.mergedDim(), v.Dim
	if post {
		n = m
	}
	return 2*n + (m*m + m) + (m*v.TextDim + v.TextDim)
}

// Params: patch_embed, pos_embed, the blocks, the merger, the deepstack
// mergers.
func (v *Qwen3VisionTower) Params() int64 {
	return v.Dim*v.patchIn() + v.Dim + v.Positions*v.Dim + v.Depth*v.blockParams() + v.mergerParams(false) +
		int64(len(v.Deepstack))*v.mergerParams(true)
}

func (v *Qwen3VisionTower) Summary() string {
	return fmt.Sprintf("%d blocks of %d, %d heads, patch %d, merge %d, deepstack %v, -> %d", v.Depth, v.Dim, v.Heads, v.Patch, v.Merge, v.Deepstack, v.TextDim)
}

func (v *Qwen3VisionTower) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Depth}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldPatch, v.Patch}, sized{FieldTemporal, v.Temporal}, sized{FieldInChans, v.InChans}, sized{FieldMerge, v.Merge},
		sized{FieldTextDim, v.TextDim}, sized{FieldPositions, v.Positions}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 20}, bounded{FieldPatch, v.Patch, 1 << 10},
		bounded{FieldMerge, v.Merge, 1 << 6}, bounded{FieldTemporal, v.Temporal, 1 << 6}, bounded{FieldInChans, v.InChans, 1 << 6},
		bounded{FieldPositions, v.Positions, 1 << 24}); err != nil {
		return err
	}
	if s := int64(math.Sqrt(float64(v.Positions))); s*s != v.Positions {
		return fieldErr(path, FieldPositions, fmt.Sprintf(" (%d) is not a square", v.Positions)).
			withHint("pos_embed is a square grid of positions (Qwen3-VL's 2304 = 48 x 48)")
	}
	seen := map[int64]bool{}
	for _, i := range v.Deepstack {
		if i < 0 || i >= v.Depth {
			return fieldErr(path, FieldDeepstack, fmt.Sprintf(" names block %d, not in 0..%d", i, v.Depth-1))
		}
		if seen[i] {
			return fieldErr(path, FieldDeepstack, fmt.Sprintf(" names block %d twice", i))
		}
		seen[i] = true
	}
	return checkChunkedImpl(path, v.Impl, "image")
}

// grid is the patches of one image a side (visionGrid).
func (v *Qwen3VisionTower) grid(pixels int64) int64 { return visionGrid(pixels, v.Patch, v.Merge) }

// ImageTokens is the tokens one image of h x w pixels adds to a sample.
func (v *Qwen3VisionTower) ImageTokens(h, w int64) int64 {
	return v.grid(h) * v.grid(w) / (v.Merge * v.Merge)
}

// visionGrid is the patches of one image a side: its size rounded to the
// nearest multiple of patch*merge pixels (at least one), as the Qwen
// processors' smart_resize does (Python's round: halves to even), over
// the patch size.
func visionGrid(pixels, patch, merge int64) int64 {
	f := float64(patch * merge)
	n := max(int64(math.RoundToEven(float64(pixels)/f)), 1)
	return n * merge
}

// registerIdle registers the tower's weights when no image runs.
func (v *Qwen3VisionTower) registerIdle(b *core.Builder) {
	d := v.Dim
	idleParam(b, "patch_embed.proj.weight", []int64{d, v.patchIn()}, core.RoleConv)
	idleParam(b, "patch_embed.proj.bias", []int64{d}, core.RoleConv)
	idleParam(b, "pos_embed.weight", []int64{v.Positions, d}, core.RoleEmbed)
	b.ReserveParams(v.Depth * 12)
	for i := int64(0); i < v.Depth; i++ {
		done := b.Scope("blocks." + core.Itoa(i))
		for _, p := range []struct {
			name  string
			shape []int64
			role  core.Role
		}{
			{"norm1.weight", []int64{d}, core.RoleNorm}, {"norm1.bias", []int64{d}, core.RoleNorm},
			{"norm2.weight", []int64{d}, core.RoleNorm}, {"norm2.bias", []int64{d}, core.RoleNorm},
			{"attn.qkv.weight", []int64{3 * d, d}, core.RoleQKV}, {"attn.qkv.bias", []int64{3 * d}, core.RoleQKV},
			{"attn.proj.weight", []int64{d, d}, core.RoleO}, {"attn.proj.bias", []int64{d}, core.RoleO},
			{"mlp.linear_fc1.weight", []int64{v.Inter, d}, core.RoleUp}, {"mlp.linear_fc1.bias", []int64{v.Inter}, core.RoleUp},
			{"mlp.linear_fc2.weight", []int64{d, v.Inter}, core.RoleDown}, {"mlp.linear_fc2.bias", []int64{d}, core.RoleDown},
		} {
			idleParam(b, p.name, p.shape, p.role)
		}
		done()
	}
	v.registerMerger(b, "merger", false)
	for j := range v.Deepstack {
		v.registerMerger(b, "deepstack_merger_list."+core.Itoa(int64(j)), true)
	}
}

func (v *Qwen3VisionTower) registerMerger(b *core.Builder, name string, post bool) {
	defer b.Scope(name)()
	m, n := v.mergedDim(), v.Dim
	if post {
		n = m
	}
	idleParam(b, "norm.weight", []int64{n}, core.RoleNorm)
	idleParam(b, "norm.bias", []int64{n}, core.RoleNorm)
	idleParam(b, "linear_fc1.weight", []int64{m, m}, core.RoleLinear)
	idleParam(b, "linear_fc1.bias", []int64{m}, core.RoleLinear)
	idleParam(b, "linear_fc2.weight", []int64{v.TextDim, m}, core.RoleLinear)
	idleParam(b, "linear_fc2.bias", []int64{v.TextDim}, core.RoleLinear)
}

// BlockPaths are the tower's blocks, Qwen3VLVisionBlock (FSDP units:
// core.BlockLister).
func (v *Qwen3VisionTower) BlockPaths() []string {
	return numbered(core.ModuleName(v)+".blocks", v.Depth)
}
