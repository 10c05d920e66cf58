package nn

import (
	"github.com/memsh/memsh/sim/core"
)

// pack is pack_image_features (LlavaNextModel's, LlavaOnevisionModel's)
// on the projected tiles h of images images laid out as l (newline:
// image_newline's parameter), then
// LlavaModel.forward's torch.cat of the images' tokens: [images *
// l.Tokens, TextDim]. Every step is a copy or a view whose backward
// keeps nothing (CatBackward0, UpsampleBilinear2DBackward0 and the
// slices keep sizes alone); image_newline is read, so it gets a gradient.
func (v *LlavaVision) pack(b *core.Builder, h core.Value, newline int32, images int64, l anyresLayout) core.Value {
	e, dt, t := v.TextDim, b.Dtype(h), v.ImageTokens()
	rows := core.NoValue
	if l.Tiles > 1 {
		// the tiles after the base image as one grid of patches
		// (view, permute(4, 0, 2, 1, 3).contiguous(): a copy), unpadded
		// by a slice (a view of it)
		grid := b.Ew("contiguous", "tile_grid", []core.Value{h}, []int64{images * (l.Tiles - 1) * t, e}, dt,
			"each image's tiles as one grid of patches (permute(...).contiguous(), a copy; unpad_image slices a view of it)")
		if l.Downscaled {
			grid = b.Ew("interpolate", "downscaled_grid", []core.Value{grid}, []int64{images * l.Rows * l.Cols, e}, dt,
				"the unpadded grid interpolated down (anyres_max: bilinear, its backward keeps sizes alone)")
		}
		c := b.AddOp("cat", "cat_image_newline", []core.Value{grid}, newline)
		rows = b.Out(c, "rows_and_newlines", []int64{images * l.Rows * (l.Cols + 1), e}, dt, "image_newline closing every row of the grid (torch.cat, a copy)")
		b.Op(c).Bytes = float64(b.Val(rows).Bytes) * 2
	}
	// the base image's tokens first (torch.cat, a copy; a lone base tile
	// gets the newline after it)
	var c int32
	if rows != core.NoValue {
		c = b.AddOp("cat", "cat_base_image", []core.Value{h, rows})
	} else {
		c = b.AddOp("cat", "cat_base_image", []core.Value{h}, newline)
	}
	img := b.Out(c, "image_feature", []int64{images * l.Tokens, e}, dt, "each image's tokens: its base tile's, then its grid's rows (torch.cat, a copy)")
	b.Op(c).Bytes = float64(b.Val(img).Bytes) * 2
	return b.Ew("cat", "image_features", []core.Value{img}, []int64{images * l.Tokens, e}, dt,
		"the images' tokens concatenated (torch.cat in the model's forward, a copy; masked_scatter's source)")
}
