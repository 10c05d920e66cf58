package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// Idefics3Vision is the vision model and connector of Idefics3 and
// SmolVLM (Idefics3VisionTransformer and Idefics3Connector in
// models/idefics3/modeling_idefics3.py, SmolVLM's copies in
// models/smolvlm, transformers 5.25.0), named as their module tree:
// vision_model and connector beside text_model.
//
//   - the processor (Idefics3ImageProcessor, SmolVLMImageProcessor)
//     resizes each image so its longest edge is 4 x Image pixels (their
//     size["longest_edge"] default, which the hub's processors keep: 1456
//     for Idefics3-8B's 364, 2048 for SmolVLM-256M's and 500M's 512, 1536
//     for SmolVLM-2.2B's 384), then to multiples of Image a side, and cuts
//     it into rows x cols tiles of Image x Image pixels plus the whole
//     image resized to one tile (Grid); fp32 pixel values and an int64
//     pixel_attention_mask of one per pixel (do_pad), both on the device
//     for the step; the pixels cast to the weights' dtype (a bf16 model
//     keeps a bf16 copy, which the convolution saves);
//   - embeddings: patch_embedding, a Conv2d of Patch x Patch with bias
//     (lowered as the matmul it is), plus position_embedding looked up by
//     position ids computed from the patch mask (int64, one a patch, which
//     the lookup saves);
//   - Layers SigLIP encoder layers (siglipLayer: every patch of a tile
//     attending to every other) and post_layernorm;
//   - the connector: pixel_shuffle, Scale x Scale neighbouring patches
//     side by side (a contiguous copy, which the projection saves), then
//     modality_projection.proj, a Linear without bias into the text
//     model's width: (Image/Patch)² / Scale² image tokens a tile;
//   - the image tokens replace the <image> placeholders of the text
//     embeddings (masked_scatter, which keeps the mask).
//
// All tiles of a micro-batch run as one batch of [tiles, patches, Dim].
// The images come from train(images=(count, height, width)). SmolVLM2's
// videos (Videos: model_type smolvlm) come from train(videos=(count,
// frames, height, width)), frames the frames the video processor sampled
// (SmolVLMVideoProcessor: fps and max_frames, the hub's 1 and 64): it
// resizes each frame's longest edge to size["longest_edge"], then the
// frame to a square of max_image_size["longest_edge"] (the tile, Image,
// as for the images), so a frame is one tile whatever its size, fp32
// pixels and an int64 pixel mask as an image's; the model runs the frames
// as images (get_image_features) and their tokens replace <image>
// placeholders. Without images or videos the weights are registered and
// nothing runs.
type Idefics3Vision struct {
	Dim        int64 // vision hidden_size
	Layers     int64 // num_hidden_layers
	Heads      int64 // num_attention_heads
	Inter      int64 // intermediate_size
	Act        string
	SquareTile       // image_size, patch_size, num_channels
	Scale      int64 // scale_factor: pixel_shuffle's factor
	TextDim    int64 // the text model's hidden_size
	Impl       string
	Videos     bool // SmolVLM2: train(videos=) frames through the tower, a tile each
	// Longest is the image processor's size["longest_edge"], the edge it
	// resizes every image's longest to before the tiling; 0 = 4 x Image,
	// the default the hub's processors keep.
	Longest int64
	// NoSplit is the image processor's do_image_splitting=False: every
	// image squared to one tile of Image pixels, written as an unsplit
	// image (Grid is 0 x 0).
	NoSplit bool
}

func (v *Idefics3Vision) Kind() string              { return "idefics3_vision" }
func (v *Idefics3Vision) Label() string             { return "" }
func (v *Idefics3Vision) DefaultName() string       { return "" } // vision_model and connector name themselves
func (v *Idefics3Vision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *Idefics3Vision) Children() []core.Layer    { return nil }
func (v *Idefics3Vision) InDim() int64              { return v.TextDim }
func (v *Idefics3Vision) OutDim() int64             { return v.TextDim }
func (v *Idefics3Vision) ReadsImages() bool         { return true }
func (v *Idefics3Vision) ReadsVideos() bool         { return v.Videos }

// side is the patches of a tile's side: image_size // patch_size, as the
// convolution (stride patch_size, no padding) and num_patches_per_side
// floor it (SmolVLM-2.2B: 384 // 14 = 27).

// TileTokens is the image tokens of one tile (the processor's
// image_seq_len).
func (v *Idefics3Vision) TileTokens() int64 { return v.patches() / (v.Scale * v.Scale) }

// ImageTokens is the tokens one image of h x w pixels adds to a sample,
// as Idefics3Processor.replace_image_token writes them: per tile
// <fake_token_around_image>, <row_i_col_j> and TileTokens <image>; a
// newline after each row; then <fake_token_around_image>, <global-img>,
// TileTokens <image>, <fake_token_around_image>. The last row's newline
// and the one before the global image are one token ("\n\n", one entry
// of the Llama 3 and SmolLM2 vocabularies).
func (v *Idefics3Vision) ImageTokens(h, w int64) int64 {
	rows, cols := v.Grid(h, w)
	t := v.TileTokens()
	return rows*cols*(t+2) + rows + t + 3
}

// FrameTokens is the tokens of one video frame's image:
// SmolVLMProcessor.replace_video_token writes each frame as one unsplit
// image (_prompt_single_image: <fake_token_around_image>, <global-img>,
// TileTokens <image>, <fake_token_around_image>).
func (v *Idefics3Vision) FrameTokens() int64 { return v.TileTokens() + 3 }

// VideoTokens is the image tokens and tags a video of frames frames adds
// to a sample. The text replace_video_token writes around them (the intro
// naming the frame count and duration, "\nFrame from MM:SS:" before each
// frame, "\n\n" after the last) is SmolLM2's tokenizer's to count, not
// memsh's: it counts with the sample's text.
func (v *Idefics3Vision) VideoTokens(frames int64) int64 { return frames * v.FrameTokens() }

// Tiles is the tiles of one image of h x w pixels: its rows x cols and
// the global image.
func (v *Idefics3Vision) Tiles(h, w int64) int64 {
	rows, cols := v.Grid(h, w)
	return rows*cols + 1
}

// maxImageSide is the image processors' MAX_IMAGE_SIZE, the longest side
// they resize to (image_processing_idefics3.py).
const maxImageSide = 4096

// Grid is the rows and columns of tiles an image of h x w pixels is cut
// into, in the processors' arithmetic (image_processing_idefics3.py,
// 5.25.0; Python's float division and int() truncation): the longest edge
// resized to 4 x Image (_resize_output_size_rescale_to_max_len: the other
// edge from the aspect ratio, made even; _resize_output_size_scale_below_
// upper_bound: at most 4096), then each side to a multiple of Image
// (resize_for_vision_encoder: the longer side rounded up, the other from
// the aspect ratio rounded up), split into Image x Image tiles
// (split_images). A Longest other than 4 x Image replaces it; with
// NoSplit (do_image_splitting=False) the processor squares every image to
// one tile and the grid is 0 x 0, as with an image of at most one tile.
func (v *Idefics3Vision) Grid(h, w int64) (rows, cols int64) {
	if v.NoSplit {
		return 0, 0
	}
	h, w = rescaleLongest(h, w, v.LongestEdge(), true)
	if max(h, w) > maxImageSide {
		h, w = rescaleLongest(h, w, maxImageSide, false)
	}
	m := v.Image
	ar := float64(w) / float64(h)
	if w >= h {
		w = ceilMultiple(w, m)
		h = ceilMultiple(int64(float64(w)/ar), m)
	} else {
		h = ceilMultiple(h, m)
		w = ceilMultiple(int64(float64(h)*ar), m)
	}
	if h <= m && w <= m { // never with the longest edge at 4 x Image
		return 0, 0
	}
	return h / m, w / m
}

// LongestEdge is the edge the processor resizes every image's longest
// to: Longest, or 4 x Image when unset.
func (v *Idefics3Vision) LongestEdge() int64 {
	if v.Longest > 0 {
		return v.Longest
	}
	return 4 * v.Image
}

// rescaleLongest is h x w with the longest edge made longest and the
// other scaled by the aspect ratio, truncated (made even when even is
// set), at least 1.
func rescaleLongest(h, w, longest int64, even bool) (int64, int64) {
	ar := float64(w) / float64(h)
	if w >= h {
		w, h = longest, int64(float64(longest)/ar)
		if even && h%2 != 0 {
			h++
		}
	} else {
		h, w = longest, int64(float64(longest)*ar)
		if even && w%2 != 0 {
			w++
		}
	}
	return max(h, 1), max(w, 1)
}

// ceilMultiple is n rounded up to a multiple of m.
func ceilMultiple(n, m int64) int64 { return (n + m - 1) / m * m }

// tensors lists the parameters, as the lowering registers them.
func (v *Idefics3Vision) tensors(fn tensorFn) {
	d := v.Dim
	fn("vision_model.embeddings.patch_embedding.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("vision_model.embeddings.patch_embedding.bias", []int64{d}, core.RoleConv)
	fn("vision_model.embeddings.position_embedding.weight", []int64{v.patches(), d}, core.RoleEmbed)
	for i := int64(0); i < v.Layers; i++ {
		encoderLayerTensors(fn, "vision_model.encoder.layers."+core.Itoa(i)+".", siglipEncoderLayer, d, v.Inter, true)
	}
	fn("vision_model.post_layernorm.weight", []int64{d}, core.RoleNorm)
	fn("vision_model.post_layernorm.bias", []int64{d}, core.RoleNorm)
	fn("connector.modality_projection.proj.weight", []int64{v.TextDim, d * v.Scale * v.Scale}, core.RoleLinear)
}

// idefics3VisionParams is the tensors outside the layers (the
// embeddings' three, post_layernorm's two, the projection's one).
const idefics3VisionParams = 6

// Params: the vision model and the connector (a formula: Params runs
// before Validate bounds the layers; tensors lists them one by one).
func (v *Idefics3Vision) Params() int64 {
	d := v.Dim
	layer := 4*d + 4*(d*d+d) + 2*d*v.Inter + v.Inter + d
	return d*v.patchIn() + d + v.patches()*d + v.Layers*layer + 2*d + d*v.Scale*v.Scale*v.TextDim
}

// ConnectorParams is the connector's share of Params.
func (v *Idefics3Vision) ConnectorParams() int64 { return v.Dim * v.Scale * v.Scale * v.TextDim }

func (v *Idefics3Vision) Summary() string {
	s := fmt.Sprintf("%d layers of %d, %d heads, tiles of %d px, patch %d, scale %d: %d tokens a tile, -> %d",
		v.Layers, v.Dim, v.Heads, v.Image, v.Patch, v.Scale, v.TileTokens(), v.TextDim)
	switch {
	case v.NoSplit:
		s += "; images not split (one tile each)"
	case v.Longest > 0:
		s += fmt.Sprintf("; images resized to a longest edge of %d px", v.Longest)
	}
	return s
}

func (v *Idefics3Vision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldMerge, v.Scale},
		sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldInChans, v.Channels, 1 << 6}, bounded{FieldImage, v.Image, 1 << 12}, bounded{FieldMerge, v.Scale, 1 << 6},
		bounded{FieldTextDim, v.TextDim, 1 << 20}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if v.Patch > v.Image {
		return fieldErr(path, FieldPatch, fmt.Sprintf(" (%d) is larger than ", v.Patch), FieldImage, fmt.Sprintf(" (%d)", v.Image))
	}
	if v.side()%v.Scale != 0 {
		return fieldErr(path, FieldMerge, fmt.Sprintf(" (%d) must divide the %d patches of a tile's side", v.Scale, v.side())).
			withHint("pixel_shuffle puts scale_factor x scale_factor neighbouring patches side by side")
	}
	switch v.Impl {
	case "sdpa", "eager", "flash":
		return nil
	}
	return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa, eager)", v.Impl))
}

// registerIdle registers the weights when no image runs.
func (v *Idefics3Vision) registerIdle(b *core.Builder) {
	registerTensors(b, v.Layers*16+idefics3VisionParams, v.tensors)
}

// BlockPaths are the vision model's encoder layers (FSDP units:
// core.BlockLister).
func (v *Idefics3Vision) BlockPaths() []string {
	return numbered("vision_model.encoder.layers", v.Layers)
}
