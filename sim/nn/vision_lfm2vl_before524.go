package nn

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// What transformers before 5.24 runs in LFM2-VL's image path (the 5.6.0
// to 5.23.0 wheels; Before524): resize_positional_embeddings
// interpolates the position grid to each image apart (F.interpolate,
// bilinear with antialias, into a [n, L, Dim] tensor it fills slice by
// slice: nothing saved), and get_image_features runs the projector on
// each image alone over its real patches (the padding cut off, no
// gather, no boolean index). Measured on the CPU with the 5.23.0 wheel:
// TestLFM2VLBefore524ImagesSaveAsTransformers.

// interpolatedPositions is the pre-5.24 resize_positional_embeddings on n
// images of L patches: one op standing for the per-image interpolations,
// the grid's gradient flowing back through them. Its transients are the
// largest image's interpolation (on the CPU in fp32: bf16 antialias is
// not supported there, so the grid is upcast first).
func (v *Lfm2VlVision) interpolatedPositions(b *core.Builder, n, L int64, im Lfm2VlImage) core.Value {
	d, g := v.Dim, v.Positions
	dt := b.Prec.Params
	if b.Rt.CPU {
		dt = units.FP32
	}
	w := b.Param("position_embedding.weight", []int64{g, d}, core.RoleEmbed)
	op := b.AddOp("interpolate", "resize_positional_embeddings", nil, w)
	pos := b.Out(op, "resized_positions", []int64{n, L, d}, b.Prec.Params, "the position grid interpolated to each image, the images side by side (F.interpolate per image, copied into one tensor)")
	b.Op(op).NoGradB = true
	b.Op(op).WorkF = dt.Bytes(g*d + slices.Max(im.Patches)*d)
	return pos
}

// projectEach is the pre-5.24 get_image_features after the tower on h
// ([n, L, Dim]): for each of the micro-batch's images (its tiles and
// thumbnail, in order) its real patches as a grid, pixel_unshuffle (a
// contiguous copy, which layer_norm or linear_1 saves), the projector
// over its tokens alone (core.SharedCalls: the same weights each call);
// then the images' tokens concatenated (torch.cat, a copy): [features,
// TextDim].
func (v *Lfm2VlVision) projectEach(b *core.Builder, h core.Value, im Lfm2VlImage, features int64) core.Value {
	f := v.Factor
	u := v.Dim * f * f
	dt := b.Dtype(h)
	var runs core.SharedCalls
	var outs []core.Value
	for range b.Batch * b.Images.Count {
		for _, p := range im.Patches {
			tokens := p / (f * f)
			runs.Begin(b)
			func() {
				defer b.Scope("multi_modal_projector")()
				x := b.Ew("contiguous", "pixel_unshuffle", []core.Value{h}, []int64{1, tokens, u}, dt,
					fmt.Sprintf("one image's %d patches, factor² side by side (pixel_unshuffle's reshape of a permuted view: a contiguous copy)", p))
				b.Op(b.Val(x).Producer).Bytes = float64(2 * dt.Bytes(tokens*u))
				if v.ProjNorm {
					x = b.LayerNorm("layer_norm", x, u, true)
				}
				x = b.Linear("linear_1", core.RoleLinear, x, u, v.ProjHidden, v.ProjBias)
				x = Activation(b, v.ProjAct, x)
				outs = append(outs, b.Linear("linear_2", core.RoleLinear, x, v.ProjHidden, v.TextDim, v.ProjBias))
			}()
			runs.End(b)
		}
	}
	y := b.Ew("cat", "image_features", outs, []int64{features, v.TextDim}, b.Dtype(outs[0]),
		"the images' tokens concatenated (torch.cat in Lfm2VlModel.forward, a copy; masked_scatter's source)")
	return y
}
