package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs CLIPVisionModel.forward (or SiglipVisionModel's) to the
// feature layer and LlavaMultiModalProjector on the plan's images, tiled
// with AnyRes (LlavaModel.get_image_features, LlavaNextModel's,
// LlavaOnevisionModel's), then with Videos on the videos' frames
// (LlavaOnevisionModel.get_video_features: the same weights, each call's
// own tensors) and joins their tokens to the text embeddings x, the
// images' first.
func (v *LlavaVision) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != v.TextDim {
		panic(core.ShapeMismatch(b, "llava_vision", v.TextDim, b.Last(x)))
	}
	im, vd := b.Images, b.Videos
	if !v.Videos {
		vd = core.Videos{}
	}
	if im.Count == 0 && vd.Count == 0 {
		v.registerIdle(b)
		return x
	}
	dataParallelImages(b, "LLaVA's", "dp, fsdp or zero")
	var l anyresLayout
	var tokens int64
	if im.Count > 0 {
		if v.AnyRes != nil {
			if err := v.AnyRes.checkPinpoints(b.Name("vision_tower"), v.Image); err != nil {
				panic(core.LowerError{Err: err})
			}
		}
		l = v.layout(im)
		tokens = im.Count * l.Tokens
		if tokens > b.Seq {
			how := fmt.Sprintf("CLIPImageProcessor crops every image to %dx%d pixels", v.Image, v.Image)
			if v.AnyRes != nil {
				how = fmt.Sprintf("AnyRes cuts a %dx%d image into %s of %d pixels", im.Height, im.Width, units.Count(l.Tiles, "tile"), v.Image)
			}
			panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
				Msg:  fmt.Sprintf("%s (%s): %d image tokens an image, %d a sample, more than seq=%d", units.Count(im.Count, "image"), how, l.Tokens, tokens, b.Seq),
				Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images"}})
		}
	}
	if vd.Count > 0 {
		per := v.videoTokens(vd.Frames)
		if all := tokens + vd.Count*per; all > b.Seq {
			panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
				Msg: fmt.Sprintf("%s of %s (each frame resized to %dx%d pixels, its patches pooled 2 x 2): %d video tokens a video; with %d image tokens, %d a sample, more than seq=%d",
					units.Count(vd.Count, "video"), units.Count(vd.Frames, "frame"), v.Image, v.Image, per, tokens, all, b.Seq),
				Hint: "seq counts the video and image tokens with the text: raise seq, or use fewer videos or frames"}})
		}
	}
	b.ReserveParams(v.tensorCount())
	var runs core.SharedCalls // the same weights for the images and the videos
	var hs []core.Value
	var kinds []string
	if im.Count > 0 {
		runs.Begin(b)
		n := b.Batch * im.Count * l.Tiles
		h, newline := v.run(b, n, "pixel_values", true)
		if v.AnyRes != nil {
			h = v.pack(b, h, newline, b.Batch*im.Count, l)
		} else {
			h = b.Ew("cat", "image_features", []core.Value{h}, []int64{n * v.ImageTokens(), v.TextDim}, b.Dtype(h),
				"the images' tokens concatenated (torch.cat in LlavaModel.forward, a copy; masked_scatter's source)")
		}
		runs.End(b)
		hs, kinds = append(hs, h), append(kinds, "image")
	}
	if vd.Count > 0 {
		runs.Begin(b)
		h, newline := v.run(b, b.Batch*vd.Count*vd.Frames, "pixel_values_videos", im.Count == 0)
		h = v.pool(b, h, newline, b.Batch*vd.Count, vd.Frames)
		runs.End(b)
		hs, kinds = append(hs, h), append(kinds, "video")
	}
	for i, h := range hs {
		if b.Dtype(h) != b.Dtype(x) {
			h = b.Cast(h, b.Dtype(x), "the "+kinds[i]+" tokens in the text embeddings' dtype")
		}
		x, _ = joinTokens(b, x, h, kinds[i])
	}
	return x
}

// run is one call of the tower and the projector on n tiles (images,
// their AnyRes tiles, or video frames; pixels names the processor's
// tensor): [n * ImageTokens, TextDim], and image_newline's parameter with
// AnyRes. Every call registers the same parameters in the same order
// (core.SharedCalls ties a later call's to the first's); first registers
// the position_ids buffer.
func (v *LlavaVision) run(b *core.Builder, n int64, pixels string, first bool) (core.Value, int32) {
	d := v.Dim
	if !core.ProductFits(n, v.tokens(), max(v.Inter, v.patchIn(), d, v.TextDim), 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"), Msg: fmt.Sprintf("%d tiles are more than memsh simulates", n), Hint: units.HintTensor}})
	}
	var newline int32 // image_newline's parameter
	if v.AnyRes != nil {
		newline = b.Param("image_newline", []int64{v.TextDim}, core.RoleEmbed)
	}
	done := b.Scope("vision_tower")
	h := v.embeddings(b, n, pixels, first)
	if !v.Siglip {
		h = b.LayerNorm("pre_layrnorm", h, d, true)
	}
	layer := siglipLayer(d, v.Heads, v.Inter, v.Act, v.Impl)
	h = b.LowerChild(&core.Repeat{Name: "encoder.layers", Layer: layer, N: v.Features}, h)
	v.unread(b, layer, h, n)
	done()
	return v.project(b, h, n), newline
}

// unread runs what the tower computes past the features h ([n, tokens,
// Dim]) that nothing reads: the layers after Features and post_layernorm
// (CLIP's on each tile's class token, SigLIP's on every patch). Their
// forward costs its FLOPs; their outputs live only in the model output's
// image_outputs, which a loop that keeps the loss drops before the
// backward, so they run as under no_grad here: nothing saved, no gradient
// to their weights (a training step leaves their .grad None). SigLIP's
// pooling head (Head) is registered, not run.
func (v *LlavaVision) unread(b *core.Builder, layer core.Layer, h core.Value, n int64) {
	defer b.NoGrad()()
	for i := v.Features; i < v.Layers; i++ {
		h = b.LowerChild(&core.Sequential{Name: "encoder.layers." + core.Itoa(i), Layers: []core.Layer{layer}}, h)
	}
	if !v.Siglip {
		// pooled_output = last_hidden_state[:, 0, :], a view
		h = b.Ew("select", "pooled_output", []core.Value{h}, []int64{n, v.Dim}, b.Dtype(h), "each tile's class token (a view)")
		b.Op(b.Val(h).Producer).Flops = 0
	}
	b.LayerNorm("post_layernorm", h, v.Dim, true)
	if v.Head {
		v.headTensors(func(name string, shape []int64, role core.Role) { b.Param(name, shape, role) }, "")
	}
}

// embeddings is CLIPVisionEmbeddings (or SiglipVisionEmbeddings) on n
// tiles (first: the tower's first call, which registers position_ids):
// the processor's fp32 pixels cast to the weights' dtype, the
// patch convolution (which saves the pixels it reads), CLIP's class token
// prepended (torch.cat, a copy), plus the position embedding of every
// token.
func (v *LlavaVision) embeddings(b *core.Builder, n int64, pixels string, first bool) core.Value {
	defer b.Scope("embeddings")()
	d, p := v.Dim, v.patches()
	pix := imagePixels(b, pixels, n*p, v.patchIn(), n*v.Channels*v.Image*v.Image, fmt.Sprintf("fp32 [%d, %d, %d, %d]", n, v.Channels, v.Image, v.Image))
	h := b.Linear("patch_embedding", core.RoleConv, pix, v.patchIn(), d, v.Siglip)
	if v.Siglip {
		b.Val(h).Shape = []int64{n, p, d}
	} else {
		cls := b.Param("class_embedding", []int64{d}, core.RoleEmbed)
		c := b.AddOp("cat", "cat_class_embedding", []core.Value{h}, cls)
		h = b.Out(c, "class_and_patches", []int64{n, p + 1, d}, b.Dtype(h), "each image's class token and patches (torch.cat, a copy)")
		b.Op(c).Bytes = float64(b.Val(h).Bytes) * 2
	}
	if first {
		v.positionIDs(b, "")
	}
	return addPositions(b, h, n, v.tokens(), d)
}

// project is LlavaMultiModalProjector on the feature layer's output h
// ([n, tokens, Dim]): [n * ImageTokens, TextDim].
func (v *LlavaVision) project(b *core.Builder, h core.Value, n int64) core.Value {
	defer b.Scope("multi_modal_projector")()
	d, t := v.Dim, v.ImageTokens()
	if !v.KeepCLS {
		dt := b.Dtype(h)
		if n > 1 {
			// linear_1 folds the strided view [:, 1:] into rows: a copy, saved
			h = b.Ew("contiguous", "features", []core.Value{h}, []int64{n * t, d}, dt, "the image features without their class tokens, folded into rows (a copy linear_1 saves)")
		} else {
			// one image: [:, 1:] folds as a view, which keeps the layer's whole output
			whole := b.Val(h).Bytes
			h = b.Ew("slice", "features", []core.Value{h}, []int64{t, d}, dt, "the image features without the class token (a view of the layer's output, whose storage linear_1 keeps)")
			b.Val(h).Bytes = whole
			b.Op(b.Val(h).Producer).Flops = 0
		}
	}
	h = b.Linear("linear_1", core.RoleLinear, h, d, v.TextDim, v.ProjBias)
	h = Activation(b, v.ProjAct, h)
	return b.Linear("linear_2", core.RoleLinear, h, v.TextDim, v.TextDim, v.ProjBias)
}
