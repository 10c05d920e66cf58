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

// videoTokens is a video's tokens: each frame's patches pooled to
// ceil(side / 2) a side, and one image_newline after the frames
// (LlavaOnevisionProcessor.replace_video_token).
func (v *LlavaVision) videoTokens(frames int64) int64 {
	q := (v.side() + 1) / 2
	return frames*q*q + 1
}

// pool is LlavaOnevisionModel.get_video_features after the projector, on
// the projected frames h of videos videos of frames frames: apply_pooling
// (each frame's patches as a [width, side, side] grid: permute(...).
// contiguous(), a copy; bilinear interpolation to ceil(side / 2) a side,
// whose backward keeps sizes alone; permuted back, a view), the frames of
// a video reshaped into one row of tokens (a copy: the permuted view does
// not fold) and image_newline after them (torch.cat, a copy):
// [videos * videoTokens, TextDim].
func (v *LlavaVision) pool(b *core.Builder, h core.Value, newline int32, videos, frames int64) core.Value {
	e, dt, q := v.TextDim, b.Dtype(h), (v.side()+1)/2
	grid := b.Ew("contiguous", "frame_grid", []core.Value{h}, []int64{videos * frames * v.patches(), e}, dt,
		"each frame's patches as a [width, side, side] grid (permute(...).contiguous(), a copy)")
	pooled := b.Ew("interpolate", "pooled_frames", []core.Value{grid}, []int64{videos * frames * q * q, e}, dt,
		"each frame's grid interpolated to ceil(side / 2) a side (bilinear, its backward keeps sizes alone)")
	rows := b.Ew("reshape", "video_rows", []core.Value{pooled}, []int64{videos * frames * q * q, e}, dt,
		"a video's frames as one row of tokens (reshape of a permuted view: a copy)")
	c := b.AddOp("cat", "cat_image_newline", []core.Value{rows}, newline)
	y := b.Out(c, "video_features", []int64{videos * v.videoTokens(frames), e}, dt, "image_newline after each video's frames (torch.cat, a copy; masked_scatter's source)")
	b.Op(c).Bytes = float64(b.Val(y).Bytes) * 2
	return y
}
