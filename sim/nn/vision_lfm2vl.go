package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// Lfm2VlVision is LFM2-VL's vision tower and multimodal projector
// (Siglip2VisionModel in models/siglip2/modeling_siglip2.py, and
// Lfm2VlMultiModalProjector and Lfm2VlModel.get_image_features in
// models/lfm2_vl/modeling_lfm2_vl.py, transformers 5.25.0), named as their
// module tree: vision_tower and multi_modal_projector beside
// language_model.
//
//   - the processor (Proc, Lfm2VlProcessor) resizes an image whose pixels
//     fit max_image_tokens (with max_pixels_tolerance) to sides of
//     multiples of Patch x Factor (smart_resize), or cuts a larger one
//     into rows x cols tiles of Proc.Tile pixels plus, under use_thumbnail,
//     the smart-resized thumbnail (Layout); every tile or image becomes
//     its patches, padded to MaxPatches (do_pad): fp32 pixel_values [n,
//     MaxPatches, Channels x Patch²] and an int32 pixel_attention_mask,
//     on the device for the step; the tower casts the pixels to its
//     weights' dtype (a bf16 model keeps a bf16 copy, which
//     patch_embedding saves);
//   - embeddings: patch_embedding, a Linear with bias over each patch's
//     values; position_embedding, a Positions-row grid (sqrt(Positions) a
//     side) resized to each image's patches by antialiased bilinear
//     weights (resize_positional_embeddings: an fp32 weight matrix [n x
//     MaxPatches, Positions], which the matmul with the grid's fp32 rows
//     saves), cast to the weights' dtype and added;
//   - Layers SigLIP encoder layers over every image's MaxPatches patches:
//     with padding (an image of fewer patches) create_bidirectional_mask
//     makes one mask [n, 1, MaxPatches, MaxPatches] a forward (bool under
//     SDPA, which every layer's SDPA converts into an additive bias in the
//     activations' dtype and saves; in the activations' dtype under eager
//     attention, added to the scores); post_layernorm;
//   - get_image_features: every image's Factor x Factor patch blocks
//     gathered into one grid (an index copy [Factor, n x MaxPatches /
//     Factor, Dim] whose backward keeps its int64 index; padding slots read
//     patch 0);
//   - multi_modal_projector: pixel_unshuffle (a contiguous copy [n x
//     MaxPatches / Factor², Dim x Factor²]), layer_norm (under
//     projector_use_layernorm), linear_1 to ProjHidden, GELU, linear_2 to
//     the text width (biases under projector_bias); the padding slots
//     dropped (a boolean index that keeps its mask), the images' tokens
//     concatenated (torch.cat, a copy) and put in place of the image
//     placeholders (masked_scatter, which keeps the mask).
//
// The images come from train(images=(count, height, width)). Without
// images the weights are registered and nothing runs.
type Lfm2VlVision struct {
	Dim        int64 // vision hidden_size
	Layers     int64 // num_hidden_layers
	Heads      int64 // num_attention_heads
	Inter      int64 // intermediate_size
	Act        string
	Patch      int64 // patch_size (and the processor's encoder_patch_size)
	Channels   int64 // num_channels
	Positions  int64 // num_patches: the position grid's rows
	Factor     int64 // downsample_factor
	ProjHidden int64 // projector_hidden_size
	ProjAct    string
	ProjBias   bool // projector_bias
	ProjNorm   bool // projector_use_layernorm
	TextDim    int64
	Impl       string
	Proc       Lfm2VlProcessor
	// Before524: transformers before 5.24 interpolates the position grid
	// to each image and runs the projector on each image apart, over its
	// real patches (vision_lfm2vl_before524.go).
	Before524 bool
}

// FieldTileSize is the processor's tile_size, FieldImageTokenRange its
// min_image_tokens and max_image_tokens (FieldMaxTiles its min_tiles and
// max_tiles); FieldDownsampleFactor is the projector's downsample_factor.
const (
	FieldTileSize         Field = "tile size"
	FieldImageTokenRange  Field = "image tokens"
	FieldDownsampleFactor Field = "downsample factor"
)

func (v *Lfm2VlVision) Kind() string              { return "lfm2_vl_vision" }
func (v *Lfm2VlVision) Label() string             { return "" }
func (v *Lfm2VlVision) DefaultName() string       { return "" } // vision_tower and multi_modal_projector name themselves
func (v *Lfm2VlVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *Lfm2VlVision) Children() []core.Layer    { return nil }
func (v *Lfm2VlVision) InDim() int64              { return v.TextDim }
func (v *Lfm2VlVision) OutDim() int64             { return v.TextDim }
func (v *Lfm2VlVision) ReadsImages() bool         { return true }

func (v *Lfm2VlVision) patchIn() int64 { return v.Channels * v.Patch * v.Patch }

// gridSide is the position grid's side: int(num_patches ** 0.5).
func (v *Lfm2VlVision) gridSide() int64 {
	s := int64(1)
	for (s+1)*(s+1) <= v.Positions {
		s++
	}
	return s
}

// MaxPatches is the patches every image is padded to: max_image_tokens x
// Factor², or a tile's patches when splitting is on and they are more
// (Lfm2VlImageProcessor._preprocess's max_num_patches).
func (v *Lfm2VlVision) MaxPatches() int64 {
	n := v.Proc.MaxTokens * v.Factor * v.Factor
	if !v.Proc.NoSplit {
		side := v.Proc.Tile / v.Patch
		n = max(n, side*side)
	}
	return n
}

// Lfm2VlImage is one image as the processor and the model see it: the
// patches of each of its tiles (and thumbnail) in order, its image tokens
// (the projector's outputs) and its tokens in the text with their tags.
type Lfm2VlImage struct {
	Layout     Lfm2VlLayout
	Patches    []int64
	Features   int64
	TextTokens int64
}

// Image lays out an image of h x w pixels.
func (v *Lfm2VlVision) Image(h, w int64) Lfm2VlImage {
	p, f := v.Patch, v.Factor
	l := v.Proc.Layout(h, w, p, f)
	im := Lfm2VlImage{Layout: l}
	one := (l.H / p) * (l.W / p)               // the single image's (or the thumbnail's) patches
	oneTokens := (l.H / p / f) * (l.W / p / f) // its features: (spatial // factor).prod()
	tags := int64(2)                           // <|image_start|>, <|image_end|>
	if !l.Split {
		im.Patches, im.Features, im.TextTokens = []int64{one}, oneTokens, oneTokens
	} else {
		side := v.Proc.Tile / p
		tiles := l.Rows * l.Cols
		for range tiles {
			im.Patches = append(im.Patches, side*side)
		}
		per := (side / f) * (side / f)
		im.Features = tiles * per
		if tiles > 1 {
			im.TextTokens, tags = tiles*per, tags+tiles // <|img_row_r_col_c|> before each tile
		} else {
			im.TextTokens = oneTokens // _build_image_tokens: one tile is written as the resized image
		}
		if v.Proc.Thumbnail && tiles > 1 {
			im.Patches = append(im.Patches, one)
			im.Features += oneTokens
			im.TextTokens += oneTokens
			tags++ // <|img_thumbnail|>
		}
	}
	if !v.Proc.NoTags {
		im.TextTokens += tags
	}
	return im
}

// tensors lists the parameters, as the lowering registers them.
func (v *Lfm2VlVision) tensors(fn tensorFn) {
	d, u := v.Dim, v.Dim*v.Factor*v.Factor
	fn("vision_tower.embeddings.patch_embedding.weight", []int64{d, v.patchIn()}, core.RoleLinear)
	fn("vision_tower.embeddings.patch_embedding.bias", []int64{d}, core.RoleLinear)
	fn("vision_tower.embeddings.position_embedding.weight", []int64{v.Positions, d}, core.RoleEmbed)
	for i := int64(0); i < v.Layers; i++ {
		encoderLayerTensors(fn, "vision_tower.encoder.layers."+core.Itoa(i)+".", siglipEncoderLayer, d, v.Inter, true)
	}
	fn("vision_tower.post_layernorm.weight", []int64{d}, core.RoleNorm)
	fn("vision_tower.post_layernorm.bias", []int64{d}, core.RoleNorm)
	if v.ProjNorm {
		fn("multi_modal_projector.layer_norm.weight", []int64{u}, core.RoleNorm)
		fn("multi_modal_projector.layer_norm.bias", []int64{u}, core.RoleNorm)
	}
	fn("multi_modal_projector.linear_1.weight", []int64{v.ProjHidden, u}, core.RoleLinear)
	if v.ProjBias {
		fn("multi_modal_projector.linear_1.bias", []int64{v.ProjHidden}, core.RoleLinear)
	}
	fn("multi_modal_projector.linear_2.weight", []int64{v.TextDim, v.ProjHidden}, core.RoleLinear)
	if v.ProjBias {
		fn("multi_modal_projector.linear_2.bias", []int64{v.TextDim}, core.RoleLinear)
	}
}

// tensorCount is the tensors tensors lists.
func (v *Lfm2VlVision) tensorCount() int64 {
	n := 5 + 16*v.Layers + 2
	if v.ProjNorm {
		n += 2
	}
	if v.ProjBias {
		n += 2
	}
	return n
}

// Params: the tower and the projector (a formula: Params runs before
// Validate bounds the layers; tensors lists them one by one).
func (v *Lfm2VlVision) Params() int64 {
	d := v.Dim
	layer := 4*d + 4*(d*d+d) + 2*d*v.Inter + v.Inter + d
	n := d*v.patchIn() + d + v.Positions*d + v.Layers*layer + 2*d
	return n + v.ProjectorParams()
}

// ProjectorParams is the projector's share of Params.
func (v *Lfm2VlVision) ProjectorParams() int64 {
	u := v.Dim * v.Factor * v.Factor
	n := u*v.ProjHidden + v.ProjHidden*v.TextDim
	if v.ProjNorm {
		n += 2 * u
	}
	if v.ProjBias {
		n += v.ProjHidden + v.TextDim
	}
	return n
}

func (v *Lfm2VlVision) Summary() string {
	s := fmt.Sprintf("%d layers of %d, %d heads, patch %d, %d positions; tiles of %d px, %d-%d tokens an image, padded to %d patches; downsample %d, projector %d -> %d",
		v.Layers, v.Dim, v.Heads, v.Patch, v.Positions, v.Proc.Tile, v.Proc.MinTokens, v.Proc.MaxTokens, v.MaxPatches(), v.Factor, v.ProjHidden, v.TextDim)
	if v.Proc.NoSplit {
		s += "; images not split"
	} else if !v.Proc.Thumbnail {
		s += "; no thumbnail"
	}
	return s
}

func (v *Lfm2VlVision) Validate(path string) error {
	pr := v.Proc
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldPositions, v.Positions}, sized{FieldDownsampleFactor, v.Factor},
		sized{FieldOutputDim, v.ProjHidden}, sized{FieldTextDim, v.TextDim}, sized{FieldTileSize, pr.Tile}, sized{FieldImageTokenRange, pr.MinTokens},
		sized{FieldMaxTiles, pr.MinTiles}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldInChans, v.Channels, 1 << 6}, bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldPositions, v.Positions, 1 << 20},
		bounded{FieldDownsampleFactor, v.Factor, 1 << 6}, bounded{FieldOutputDim, v.ProjHidden, 1 << 20}, bounded{FieldTextDim, v.TextDim, 1 << 20},
		bounded{FieldTileSize, pr.Tile, 1 << 14}, bounded{FieldImageTokenRange, pr.MaxTokens, 1 << 16}, bounded{FieldMaxTiles, pr.MaxTiles, 1 << 8}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if s := v.gridSide(); s*s != v.Positions {
		return fieldErr(path, FieldPositions, fmt.Sprintf(" (%d) must be a square: Siglip2VisionEmbeddings reshapes position_embedding into a square grid", v.Positions))
	}
	if pr.Tile%(v.Patch*v.Factor) != 0 {
		return fieldErr(path, FieldTileSize, fmt.Sprintf(" (%d) must be a multiple of ", pr.Tile), FieldPatch, " x ", FieldDownsampleFactor,
			fmt.Sprintf(" (%d): a tile's patches are gathered in blocks of %d x %d", v.Patch*v.Factor, v.Factor, v.Factor))
	}
	if pr.MaxTokens < pr.MinTokens {
		return fieldErr(path, FieldImageTokenRange, fmt.Sprintf(": max_image_tokens (%d) is less than min_image_tokens (%d)", pr.MaxTokens, pr.MinTokens))
	}
	if !pr.NoSplit && pr.MaxTiles < pr.MinTiles {
		return fieldErr(path, FieldMaxTiles, fmt.Sprintf(": max_tiles (%d) is less than min_tiles (%d) (the processor raises)", pr.MaxTiles, pr.MinTiles))
	}
	if !(pr.Tolerance > 0) || pr.Tolerance > 1<<20 {
		return fieldErr(path, fmt.Sprintf("max_pixels_tolerance must be positive and at most %d (got %g)", 1<<20, pr.Tolerance))
	}
	switch v.Impl {
	case "sdpa", "eager", "flash":
		return nil
	}
	return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa, eager)", v.Impl))
}

// registerIdle registers the weights when no image runs.
func (v *Lfm2VlVision) registerIdle(b *core.Builder) { registerTensors(b, v.tensorCount(), v.tensors) }

// BlockPaths are the tower's encoder layers (FSDP units: core.BlockLister).
func (v *Lfm2VlVision) BlockPaths() []string {
	return numbered("vision_tower.encoder.layers", v.Layers)
}
