package nn

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
)

// Glm4vVisionTower is the vision tower of GLM-4.1V-Thinking, GLM-4.5V and
// GLM-4.6V, as transformers 5.25.0 runs it (Glm4vVisionModel,
// models/glm4v/modeling_glm4v.py, and Glm4vModel.get_image_features /
// get_video_features), named as its module tree (model.visual):
//
//   - each image, resized as Glm4vImageProcessor's smart_resize does (a
//     multiple of patch*merge pixels a side within its pixel budget:
//     GlmResize), is cut into patch x patch x temporal patches, embedded by
//     patch_embed.proj (a Conv3d with bias, lowered as the matmul it is)
//     and RMS-normed (post_conv_layernorm);
//   - embeddings.position_embedding, a learned square grid of
//     (image_size/patch_size)² positions, is resampled to each image's grid
//     by F.grid_sample (bicubic, in fp32: the table's fp32 copy and the
//     sampling grid, [1, patches, 1, 2] fp32, are what it saves) and added;
//   - depth pre-norm blocks (RMS norms): attention (qkv biased by
//     attention_bias, proj without bias, 2-D rotary embeddings of fp32
//     [patches, head_dim] tables made once a step, each image attended to
//     as a whole) and a gated MLP (gate_proj, up_proj, down_proj without
//     biases) out_hidden_size wide;
//   - post_layernorm, then downsample: a Conv2d of merge x merge patches
//     (with bias) to out_hidden_size, lowered as the matmul over the
//     merged patches it is (it saves the norm's output);
//   - the merger (Glm4vVisionPatchMerger): proj (no bias), a LayerNorm
//     with bias, GELU, then a gated MLP of intermediate_size
//     (gate_proj, up_proj, down_proj, no biases): one image token per
//     merge² patches, in the language model's width.
//
// The image tokens replace the image placeholders of the text embeddings
// (masked_scatter). A video runs through the tower as its temporal patch
// groups, each a segment of its own (get_video_features flattens
// video_grid_thw to one [1, h, w] row a group), and its tokens replace the
// placeholders under input_ids == image_token_id (GLM-4.1V's and
// GLM-4.5V's video placeholders are image tokens), so a step takes images
// or videos, not both (get_placeholder_mask would count the image tokens
// among the video ones). The processor writes each group's tokens between
// begin_of_image and end_of_image, then its timestamp (glm4vVideoText).
type Glm4vVisionTower struct {
	Name      string
	Dim       int64 // hidden_size
	Depth     int64
	Heads     int64
	Inter     int64  // the merger's MLP width: intermediate_size
	Act       string // the gated MLPs' activation (swiglu for hidden_act silu)
	Patch     int64  // patch_size
	Temporal  int64  // temporal_patch_size
	InChans   int64
	Merge     int64 // spatial_merge_size
	TextDim   int64 // out_hidden_size: the blocks' MLP width, the language model's
	Positions int64 // (image_size / patch_size)²: a square grid
	AttnBias  bool  // attention_bias: qkv's bias
	Impl      string
}

func (v *Glm4vVisionTower) Kind() string           { return "glm4v_vision_tower" }
func (v *Glm4vVisionTower) Label() string          { return v.Name }
func (v *Glm4vVisionTower) DefaultName() string    { return "visual" }
func (v *Glm4vVisionTower) Children() []core.Layer { return nil }
func (v *Glm4vVisionTower) InDim() int64           { return v.TextDim }
func (v *Glm4vVisionTower) OutDim() int64          { return v.TextDim }
func (v *Glm4vVisionTower) ReadsImages() bool      { return true }
func (v *Glm4vVisionTower) ReadsVideos() bool      { return true }

func (v *Glm4vVisionTower) patchIn() int64   { return v.InChans * v.Temporal * v.Patch * v.Patch }
func (v *Glm4vVisionTower) mergedDim() int64 { return v.Dim * v.Merge * v.Merge }

// Params: patch_embed (with bias), post_conv_layernorm, the position
// table, the blocks (two norms, qkv, proj, the gated MLP), post_layernorm,
// downsample (with bias), the merger (proj, its LayerNorm, the gated MLP).
// A formula: Params runs before Validate bounds the depth.
func (v *Glm4vVisionTower) Params() int64 {
	d, o := v.Dim, v.TextDim
	block := 2*d + 3*d*d + d*d + 3*d*o
	if v.AttnBias {
		block += 3 * d
	}
	return d*v.patchIn() + d + d + v.Positions*d + v.Depth*block + d + (o*v.mergedDim() + o) + (o*o + 2*o + 3*o*v.Inter)
}

func (v *Glm4vVisionTower) Summary() string {
	return fmt.Sprintf("%d blocks of %d, %d heads, patch %d, merge %d, -> %d", v.Depth, v.Dim, v.Heads, v.Patch, v.Merge, v.TextDim)
}

func (v *Glm4vVisionTower) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Depth}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldPatch, v.Patch}, sized{FieldTemporal, v.Temporal}, sized{FieldInChans, v.InChans}, sized{FieldMerge, v.Merge},
		sized{FieldTextDim, v.TextDim}, sized{FieldPositions, v.Positions}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if hd := v.Dim / v.Heads; hd%4 != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) leaves heads of %d: the 2-D rotary embedding needs a multiple of 4", v.Heads, hd))
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 20}, bounded{FieldTextDim, v.TextDim, 1 << 20},
		bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldMerge, v.Merge, 1 << 6}, bounded{FieldTemporal, v.Temporal, 1 << 6},
		bounded{FieldInChans, v.InChans, 1 << 6}, bounded{FieldPositions, v.Positions, 1 << 24}, bounded{FieldDepth, v.Depth, 1 << 12}); err != nil {
		return err
	}
	if err := (&MLP{Dim: v.Dim, Hidden: v.TextDim, Act: v.Act}).Validate(path); err != nil {
		return err
	}
	return checkChunkedImpl(path, v.Impl, "image")
}

// frameTokens is the tokens of one frame (a temporal group) resized to
// h x w pixels.
func (v *Glm4vVisionTower) frameTokens(h, w int64) int64 {
	return (h / v.Patch) * (w / v.Patch) / (v.Merge * v.Merge)
}

// BlockPaths are the tower's blocks, Glm4vVisionBlock (FSDP units:
// core.BlockLister).
func (v *Glm4vVisionTower) BlockPaths() []string {
	return numbered(core.ModuleName(v)+".blocks", v.Depth)
}

// tensors lists the parameters in the module's order.
func (v *Glm4vVisionTower) tensors(fn tensorFn) {
	d, o := v.Dim, v.TextDim
	linear := func(name string, out, in int64, role core.Role) { fn(name+".weight", []int64{out, in}, role) }
	fn("embeddings.position_embedding.weight", []int64{v.Positions, d}, core.RoleEmbed)
	fn("patch_embed.proj.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("patch_embed.proj.bias", []int64{d}, core.RoleConv)
	for i := int64(0); i < v.Depth; i++ {
		p := "blocks." + core.Itoa(i) + "."
		fn(p+"norm1.weight", []int64{d}, core.RoleNorm)
		fn(p+"norm2.weight", []int64{d}, core.RoleNorm)
		linear(p+"attn.qkv", 3*d, d, core.RoleQKV)
		if v.AttnBias {
			fn(p+"attn.qkv.bias", []int64{3 * d}, core.RoleQKV)
		}
		linear(p+"attn.proj", d, d, core.RoleO)
		linear(p+"mlp.gate_proj", o, d, core.RoleGate)
		linear(p+"mlp.up_proj", o, d, core.RoleUp)
		linear(p+"mlp.down_proj", d, o, core.RoleDown)
	}
	linear("merger.proj", o, o, core.RoleLinear)
	fn("merger.post_projection_norm.weight", []int64{o}, core.RoleNorm)
	fn("merger.post_projection_norm.bias", []int64{o}, core.RoleNorm)
	linear("merger.gate_proj", v.Inter, o, core.RoleGate)
	linear("merger.up_proj", v.Inter, o, core.RoleUp)
	linear("merger.down_proj", o, v.Inter, core.RoleDown)
	fn("post_conv_layernorm.weight", []int64{d}, core.RoleNorm)
	fn("downsample.weight", []int64{o, v.mergedDim()}, core.RoleConv)
	fn("downsample.bias", []int64{o}, core.RoleConv)
	fn("post_layernorm.weight", []int64{d}, core.RoleNorm)
}

// registerIdle registers the tower's weights when no image runs.
func (v *Glm4vVisionTower) registerIdle(b *core.Builder) {
	n := int64(16) + v.Depth*7
	if v.AttnBias {
		n += v.Depth
	}
	conv := convRole(b)
	registerTensors(b, n, func(fn tensorFn) {
		v.tensors(func(name string, shape []int64, role core.Role) {
			if strings.HasPrefix(name, "patch_embed.proj.") {
				role = conv // not downsample, a Conv2d whose leaf name no nn.Linear has
			}
			fn(name, shape, role)
		})
	})
}

// convRole is the role of the tower's patch_embed.proj, a Conv3d:
// RoleConvLeaf where LoRA's all-linear reaches it by its leaf name, proj
// being the leaf name of the blocks' attn.proj and the merger's proj,
// nn.Linear modules (GLM-4.5V, glm4v_moe, whose targets PEFT converts:
// lora.Conv3d, lora_A [r, C, T, P, P], lora_B [out, r, 1, 1, 1], the
// matmul's adapter in another shape); else RoleConv.
func convRole(b *core.Builder) core.Role {
	if b.AllLinearByLeaf() {
		return core.RoleConvLeaf
	}
	return core.RoleConv
}
