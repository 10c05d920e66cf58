package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs Idefics3Model.get_image_features on the plan's images, or
// SmolVLM2's on its videos' frames (tiles), the vision model then the
// connector, and joins their tokens to the text embeddings x
// (inputs_merger).
func (v *Idefics3Vision) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Videos.Count == 0 || !v.Videos {
		if idleWithoutImages(b, "idefics3_vision", v.TextDim, x, v.registerIdle) {
			return x
		}
	} else if b.Last(x) != v.TextDim {
		panic(core.ShapeMismatch(b, "idefics3_vision", v.TextDim, b.Last(x)))
	}
	dataParallelImages(b, "Idefics3's and SmolVLM's", "dp, fsdp or zero")
	n := b.Batch * v.tilesFitting(b)
	d := v.Dim
	if !core.ProductFits(n, v.patches(), max(v.Inter, v.patchIn(), d*v.Scale*v.Scale/v.patches()+1, v.TextDim, d), 8) || !core.ProductFits(n, v.Image, v.Image, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"), Msg: fmt.Sprintf("%d tiles are more than memsh simulates", n), Hint: units.HintTensor}})
	}
	b.ReserveParams(v.Layers*16 + idefics3VisionParams)
	done := b.Scope("vision_model")
	h := v.embeddings(b, n)
	layer := siglipLayer(d, v.Heads, v.Inter, v.Act, v.Impl)
	h = b.LowerChild(&core.Repeat{Name: "encoder.layers", Layer: layer, N: v.Layers}, h)
	h = b.LayerNorm("post_layernorm", h, d, true)
	done()
	h = v.connect(b, h, n)
	return joinImageFeatures(b, x, h)
}

// tilesFitting is the tiles a sample's images or videos run through the
// vision model; their tokens must fit the sequence.
func (v *Idefics3Vision) tilesFitting(b *core.Builder) int64 {
	im, vd := b.Images, b.Videos
	if vd.Count > 0 {
		if im.Count > 0 {
			panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"),
				Msg:  "SmolVLM2 with images and videos in one step is not modelled",
				Hint: "train images and videos in separate steps"}})
		}
		if tokens := vd.Count * v.VideoTokens(vd.Frames); tokens > b.Seq {
			panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"),
				Msg: fmt.Sprintf("%s of %s: each frame one tile of %d pixels a side, %d tokens a frame with its tags, %d a sample, more than seq=%d",
					units.Count(vd.Count, "video"), units.Count(vd.Frames, "frame"), v.Image, v.FrameTokens(), tokens, b.Seq),
				Hint: "seq counts the frames' tokens with the text (the processor's intro and timestamps among it): raise seq, or use fewer videos or frames"}})
		}
		return vd.Count * vd.Frames
	}
	rows, cols := v.Grid(im.Height, im.Width)
	if tokens := im.Count * v.ImageTokens(im.Height, im.Width); tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"),
			Msg: fmt.Sprintf("%s of %dx%d pixels: %s an image (%dx%d and the whole image, of %d pixels a side; the processor resizes the longest edge to %d first), %d tokens an image with their tags, %d a sample, more than seq=%d",
				units.Count(im.Count, "image"), im.Height, im.Width, units.Count(rows*cols+1, "tile"), rows, cols, v.Image, v.LongestEdge(), v.ImageTokens(im.Height, im.Width), tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer images"}})
	}
	return im.Count * v.Tiles(im.Height, im.Width)
}

// embeddings is Idefics3VisionEmbeddings on n tiles: the processor's fp32
// pixels and int64 pixel mask, the pixels cast to the weights' dtype, the
// patch convolution (which saves them), plus the position embedding
// looked up by the position ids made from the mask (bucketize; the lookup
// saves them).
func (v *Idefics3Vision) embeddings(b *core.Builder, n int64) core.Value {
	defer b.Scope("embeddings")()
	d, p := v.Dim, v.patches()
	// the convolution reads the patches whole (384 // 14 = 27 a side for
	// SmolVLM-2.2B), the tiles hold every pixel
	pix := imagePixels(b, "pixel_values", n*p, v.patchIn(), n*v.Channels*v.Image*v.Image, fmt.Sprintf("fp32 [%d, %d, %d, %d]", n, v.Channels, v.Image, v.Image))
	mk := b.AddOp("data", "pixel_attention_mask", nil)
	mask := b.Out(mk, "pixel_attention_mask", []int64{n, v.Image, v.Image}, units.INT64, "the processor's pixel mask (int64, one a pixel: do_pad)")
	b.Val(mask).Grad = false
	b.P.Held = append(b.P.Held, mask)
	h := b.Linear("patch_embedding", core.RoleConv, pix, v.patchIn(), d, true)
	b.Val(h).Shape = []int64{n, p, d}
	ids := b.Ew("bucketize", "position_ids", []core.Value{mask}, []int64{n, p}, units.INT64, "each patch's position (int64, from the patch mask), saved by the lookup")
	b.Val(ids).Grad = false
	w := b.Param("position_embedding.weight", []int64{p, d}, core.RoleEmbed)
	e := b.AddOp("embedding", "position_embedding", []core.Value{ids}, w)
	pos := b.Out(e, "position_embedding", []int64{n, p, d}, b.Prec.Params, "the position embeddings of the patches")
	b.Op(e).NoGradB = true
	b.Save(e, ids)
	a := b.AddOp("add", "add_position_embedding", []core.Value{h, pos})
	y := b.Out(a, "embeddings", []int64{n, p, d}, core.Promote(b.Dtype(h), b.Dtype(pos)), "the patch embeddings plus their positions")
	b.Op(a).Flops = float64(n * p * d)
	return y
}

// connect is Idefics3Connector on the vision model's output h ([n,
// patches, Dim]): pixel_shuffle's two reshapes of permuted views (the
// second's contiguous copy is what the projection saves), then
// modality_projection.proj without bias: [n*TileTokens, TextDim], the
// tiles' tokens in order (get_image_features' reshape and torch.cat, a
// copy).
func (v *Idefics3Vision) connect(b *core.Builder, h core.Value, n int64) core.Value {
	defer b.Scope("connector")()
	s2 := v.Scale * v.Scale
	dt := b.Dtype(h)
	h = b.Ew("contiguous", "pixel_shuffle", []core.Value{h}, []int64{n, v.patches() / s2, v.Dim * s2}, dt,
		"scale_factor² neighbouring patches side by side (pixel_shuffle's reshapes of permuted views: contiguous copies)")
	h = b.Linear("modality_projection.proj", core.RoleLinear, h, v.Dim*s2, v.TextDim, false)
	return b.Ew("cat", "image_features", []core.Value{h}, []int64{n * v.TileTokens(), v.TextDim}, b.Dtype(h), "the tiles' tokens concatenated (torch.cat in Idefics3Model.forward, a copy; masked_scatter's source)")
}
