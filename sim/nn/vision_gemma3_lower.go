package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs SiglipVisionModel.forward and Gemma3MultiModalProjector on
// the plan's images (Gemma3Model.get_image_features) and joins their soft
// tokens to the text embeddings x.
func (v *Gemma3Vision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "gemma3_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	if tokens := im.Count * v.Tokens; tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("%s (Gemma3ImageProcessor resizes every image to %dx%d pixels): %d image tokens an image, %d a sample, more than seq=%d",
				units.Count(im.Count, "image"), v.Image, v.Image, v.Tokens, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer images"}})
	}
	d, p := v.Dim, v.patches()
	n := b.Batch * im.Count
	if !core.ProductFits(n, p, max(v.Inter, v.patchIn(), d), 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"), Msg: fmt.Sprintf("%d images are more than memsh simulates", n), Hint: units.HintTensor}})
	}
	b.ReserveParams(v.Layers*16 + gemma3VisionParams)
	done := b.Scope("vision_tower")
	h := v.embeddings(b, n)
	layer := siglipLayer(d, v.Heads, v.Inter, v.Act, v.Impl)
	h = b.LowerChild(&core.Repeat{Name: "encoder.layers", Layer: layer, N: v.Layers}, h)
	h = b.LayerNorm("post_layernorm", h, d, true)
	done()
	h = v.project(b, h, n)
	return joinImageFeatures(b, x, h)
}

// embeddings is SiglipVisionEmbeddings on n images: the processor's fp32
// pixels cast to the weights' dtype, the patch convolution (which saves
// the images it reads), plus the position embedding of every patch.
func (v *Gemma3Vision) embeddings(b *core.Builder, n int64) core.Value {
	defer b.Scope("embeddings")()
	d, p := v.Dim, v.patches()
	pix := imagePixels(b, "pixel_values", n*p, v.patchIn(), n*v.Channels*v.Image*v.Image, fmt.Sprintf("fp32 [%d, %d, %d, %d]", n, v.Channels, v.Image, v.Image))
	h := b.Linear("patch_embedding", core.RoleConv, pix, v.patchIn(), d, true)
	b.Val(h).Shape = []int64{n, p, d}
	v.positionIDs(b, "")
	y := addPositions(b, h, n, p, d)
	return y
}

// project is Gemma3MultiModalProjector on the tower's output h ([n,
// patches, Dim]): the soft tokens, [n*Tokens, TextDim].
func (v *Gemma3Vision) project(b *core.Builder, h core.Value, n int64) core.Value {
	defer b.Scope("multi_modal_projector")()
	d, side := v.Dim, v.side()
	dt := b.Dtype(h)
	grid := b.Ew("contiguous", "patch_grid", []core.Value{h}, []int64{n, d, side, side}, dt, "the patches as a contiguous [images, width, side, side] grid (avg_pool2d's input, saved)")
	ap := b.AddOp("avg_pool2d", "avg_pool", []core.Value{grid})
	pooled := b.Out(ap, "pooled", []int64{n * v.Tokens, d}, dt, "the patches averaged into soft tokens")
	b.Save(ap, grid)
	b.Op(ap).Flops = float64(core.Numel(b.Shape(grid)))
	normed := gemmaNorm(b, "mm_soft_emb_norm", pooled, d)
	// torch.matmul folds the transposed rows into a contiguous copy, which
	// the product saves for the weight's gradient.
	if b.Prec.Autocast {
		normed = b.Cast(normed, b.Prec.Compute, "autocast copy of the soft tokens for the projection")
	}
	rows := b.Ew("contiguous", "folded", []core.Value{normed}, b.Shape(normed), b.Dtype(normed), "the normed soft tokens made contiguous (torch.matmul's fold, saved)")
	w := b.Param("mm_input_projection_weight", []int64{d, v.TextDim}, core.RoleLinear)
	wv := b.Weight(w, b.Dtype(rows))
	ins := []core.Value{rows}
	if wv != core.NoValue {
		ins = append(ins, wv)
	}
	mm := b.AddOp("matmul", "mm_input_projection", ins, w)
	y := b.Out(mm, "soft_tokens", []int64{n * v.Tokens, v.TextDim}, b.Dtype(rows), "the soft tokens in the text model's width")
	if b.Trainable(w) {
		b.Save(mm, rows)
	}
	if b.Grad(rows) {
		b.Save(mm, wv)
	}
	b.Op(mm).Flops = 2 * float64(n*v.Tokens) * float64(d) * float64(v.TextDim)
	return b.Cast(y, dt, "the soft tokens in the tower's dtype (type_as)")
}
