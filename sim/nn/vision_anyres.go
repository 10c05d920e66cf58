package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// AnyRes is LLaVA-NeXT's tiling of an image of any size ("anyres",
// models/llava_next and models/llava_onevision, transformers 5.25.0), as
// LlavaVision runs it:
//
//   - select_best_resolution (image_processing_utils.py) picks the
//     pinpoint (a height and width, multiples of the tower's image size)
//     that keeps most of the image's pixels once scaled into it, and of
//     those the one that wastes least;
//   - the image is resized into that pinpoint, padded and cut into tiles
//     of the tower's image size; the whole image resized to one tile (the
//     base image) goes first: image_size_to_num_patches' tiles, each
//     through the tower;
//   - pack_image_features: the tiles' projected features laid out as one
//     grid of patches (permute(...).contiguous(), a copy), the padding's
//     rows or columns sliced away (unpad_image, a view: the image's
//     aspect ratio decides how many patches stay), with MaxTiles
//     (OneVision's anyres_max_9) shrunk by bilinear interpolation when
//     more than 1.1 x sqrt(MaxTiles) tiles' patches a side remain,
//     image_newline appended to every row (torch.cat, a copy), and the
//     base image's features put first (torch.cat, a copy).
//
// The processor counts the same tokens (LlavaNextProcessor's and
// LlavaOnevisionProcessor's _get_number_of_features). With OneImage
// (OneVision) a sample of several images runs each as its base tile
// alone, with one newline (the processor's batch_num_images).
type AnyRes struct {
	Pinpoints [][2]int64 // image_grid_pinpoints: (height, width) in pixels
	MaxTiles  int64      // vision_aspect_ratio "anyres_max_N": N; 0 (LLaVA-NeXT) for no bound
	OneImage  bool       // several images a sample run as their base tiles (LLaVA-OneVision)
}

// anyresLayout is one image's tiling: Tiles through the tower (the base
// image first), the grid's patches a side after unpadding and any
// downscale (Rows x Cols), and the image tokens (the base image's,
// Rows x Cols, and one newline a row).
type anyresLayout struct {
	Tiles, Rows, Cols, Tokens int64
	Downscaled                bool // anyres_max: the grid was interpolated down
}

// validate checks vision_aspect_ratio's bound.
func (a *AnyRes) validate(path string) error {
	if a.MaxTiles < 0 || a.MaxTiles > 1<<10 {
		return fieldErr(path, fmt.Sprintf("vision_aspect_ratio's anyres_max (%d) must be between 1 and 1024", a.MaxTiles))
	}
	return nil
}

// checkPinpoints checks the pinpoints against the tower's image size
// once images run (transformers builds the model from any list; its
// forward needs whole tiles: image_size_to_num_patches counts ceil(pinpoint
// / image size) tiles a side, pack_image_features views floor(...)).
func (a *AnyRes) checkPinpoints(path string, image int64) *units.Error {
	if len(a.Pinpoints) == 0 {
		return &units.Error{Path: path, Msg: "image_grid_pinpoints is empty: AnyRes has no resolution to tile an image at",
			Hint: "image_grid_pinpoints lists the resolutions (height, width) an image may be tiled at"}
	}
	for _, p := range a.Pinpoints {
		if p[0]%image != 0 || p[1]%image != 0 || p[0] > 1<<16 || p[1] > 1<<16 {
			return &units.Error{Path: path, Msg: fmt.Sprintf("image_grid_pinpoints has [%d, %d]: each must be a multiple of vision_config.image_size (%d), at most 65536", p[0], p[1], image),
				Hint: "pack_image_features lays an image's tiles out as a grid of whole tiles"}
		}
	}
	return nil
}

// bestResolution is select_best_resolution: the pinpoint that keeps most
// of an h x w image's pixels once scaled into it, then wastes least.
func (a *AnyRes) bestResolution(h, w int64) [2]int64 {
	var best [2]int64
	maxEffective, minWasted := int64(0), int64(math.MaxInt64)
	for _, p := range a.Pinpoints {
		scale := math.Min(float64(p[1])/float64(w), float64(p[0])/float64(h))
		dw, dh := int64(float64(w)*scale), int64(float64(h)*scale)
		effective := min(dw*dh, w*h)
		wasted := p[0]*p[1] - effective
		if effective > maxEffective || effective == maxEffective && wasted < minWasted {
			maxEffective, minWasted, best = effective, wasted, p
		}
	}
	return best
}

// layout is an h x w image's tiling on a tower of image pixels a tile and
// side patches a tile side; images is the sample's image count (OneImage
// tiles only a sample's single image).
func (a *AnyRes) layout(h, w, image, side, images int64) anyresLayout {
	if a.OneImage && images > 1 {
		return anyresLayout{Tiles: 1, Tokens: side*side + 1}
	}
	best := a.bestResolution(h, w)
	gh, gw := best[0]/image, best[1]/image
	rows, cols := gh*side, gw*side
	// unpad_image: the rows (or columns) the padding filled are dropped
	if float64(w)/float64(h) > float64(cols)/float64(rows) {
		kept := int64(round7(float64(h) * (float64(cols) / float64(w))))
		rows -= 2 * ((rows - kept) / 2)
	} else {
		kept := int64(round7(float64(w) * (float64(rows) / float64(h))))
		cols -= 2 * ((cols - kept) / 2)
	}
	l := anyresLayout{Tiles: gh*gw + 1}
	if a.MaxTiles > 0 {
		// anyres_max_N: more than 1.1 x N tiles' patches are interpolated down
		if ratio := math.Sqrt(float64(rows*cols) / float64(a.MaxTiles*side*side)); ratio > 1.1 {
			rows, cols = int64(math.Floor(float64(rows)/ratio)), int64(math.Floor(float64(cols)/ratio))
			l.Downscaled = true
		}
	}
	l.Rows, l.Cols = rows, cols
	l.Tokens = side*side + rows*cols + rows
	return l
}

// round7 is Python's round(x, 7) for the sizes unpad_image rounds.
func round7(x float64) float64 { return math.Round(x*1e7) / 1e7 }
