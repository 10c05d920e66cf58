package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs InternVLVisionModel.forward and InternVLMultiModalProjector
// on the tiles of the plan's images (InternVLModel.get_image_features) and
// joins their tokens to the text embeddings x.
func (v *InternVLVision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "internvl_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	dataParallelImages(b, "InternVL's", "dp, fsdp or zero")
	tiles := v.Tiles(im.Height, im.Width)
	if tokens := im.Count * v.TextTokens(im.Height, im.Width); tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("%s of %dx%d pixels: %s an image (GotOcr2ImageProcessor: up to %d tiles of %d pixels, and a thumbnail), %d image tokens a sample with <img> and </img>, more than seq=%d",
				units.Count(im.Count, "image"), im.Height, im.Width, units.Count(tiles, "tile"), v.MaxTiles, v.Image, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images"}})
	}
	n, p, d := b.Batch*im.Count*tiles, v.patches()+1, v.Dim
	if !core.ProductFits(n, p, max(v.patchIn(), v.Inter, v.mergedDim()), 4) || v.Impl == "eager" && !core.ProductFits(n, p, p, v.Heads, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"), Msg: fmt.Sprintf("%d tiles are more than memsh simulates", n), Hint: units.HintTensor}})
	}
	b.ReserveParams(v.tensorCount())
	done := b.Scope("vision_tower")
	h := v.embeddings(b, n)
	h = b.LowerChild(&core.Repeat{Name: "encoder.layer", Layer: v.layer(), N: v.Layers}, h)
	if !v.MeanPooling {
		h = b.LayerNorm("layernorm", h, d, true)
	}
	done()
	h = v.project(b, h, n)
	return joinImageFeatures(b, x, h)
}

// layer is InternVLVisionLayer: x + lambda_1 * attention(layernorm_before(x)),
// then x + lambda_2 * mlp(layernorm_after(x)).
func (v *InternVLVision) layer() core.Layer {
	d := v.Dim
	attn := &Attention{Name: "attention", Dim: d, Heads: v.Heads, QKVBias: v.AttnBias, QKNormWide: v.QKNorm, QKNormWideLlama: v.QKNorm, OutBias: true, Impl: v.Impl, OutName: "projection_layer"}
	return &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{&Norm{Name: "layernorm_before", Dim: d, RMS: v.RMS, Bias: !v.RMS}, attn,
			&LayerScale{Name: "lambda_1", Dim: d}}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{&Norm{Name: "layernorm_after", Dim: d, RMS: v.RMS, Bias: !v.RMS},
			&MLP{Name: "mlp", Dim: d, Hidden: v.Inter, Act: v.Act, Bias: true}, &LayerScale{Name: "lambda_2", Dim: d}}}},
	}}
}

// embeddings is InternVLVisionEmbeddings on n tiles: the processor's fp32
// pixels cast to the model's dtype, the patch convolution (which saves
// the tiles it reads), the cls token in front of each tile's patches
// (torch.cat, a copy), plus the position embeddings.
func (v *InternVLVision) embeddings(b *core.Builder, n int64) core.Value {
	defer b.Scope("embeddings")()
	d, p := v.Dim, v.patches()
	op := b.AddOp("data", "pixel_values", nil)
	pix := b.Out(op, "pixel_values", []int64{n * p, v.patchIn()}, units.FP32,
		fmt.Sprintf("tiles from the processor (fp32 [%d, %d, %d, %d])", n, v.Channels, v.Image, v.Image))
	b.Val(pix).Grad = false
	b.P.Held = append(b.P.Held, pix)
	pix = b.Cast(pix, b.Prec.Params, "the tiles in the model's dtype (pixel_values.to(self.dtype), saved by the convolution)")
	h := b.Linear("patch_embeddings.projection", core.RoleConv, pix, v.patchIn(), d, true)
	cls := b.Param("cls_token", []int64{1, 1, d}, core.RoleEmbed)
	c := b.AddOp("cat", "cat_cls", []core.Value{h}, cls)
	dt := core.Promote(b.Dtype(h), b.Prec.Params)
	h = b.Out(c, "with_cls", []int64{n, p + 1, d}, dt, "the cls token and each tile's patches (torch.cat, a copy)")
	b.Op(c).Bytes += float64(b.Val(h).Bytes)
	pos := b.Param("position_embeddings", []int64{1, p + 1, d}, core.RoleEmbed)
	a := b.AddOp("add", "add_position_embeddings", []core.Value{h}, pos)
	y := b.Out(a, "embeddings", []int64{n, p + 1, d}, dt, "the embeddings plus their positions")
	b.Op(a).Flops = float64(n * (p + 1) * d)
	return y
}

// project drops the cls token (a view), pixel-shuffles the tower's output
// ([n, patches+1, Dim]) into [n, TileTokens, Dim x Merge²] and runs
// InternVLMultiModalProjector: the image tokens, [n*TileTokens, TextDim].
func (v *InternVLVision) project(b *core.Builder, h core.Value, n int64) core.Value {
	m, tokens, dt := v.mergedDim(), n*v.TileTokens(), b.Dtype(h)
	half := core.Numel(b.Shape(h)) / (v.patches() + 1) * v.patches() // the cls dropped
	s := b.Ew("contiguous", "pixel_shuffle", []core.Value{h}, []int64{half / v.Dim, v.Dim}, dt, "each row's merge patches side by side (pixel_shuffle's first permute().contiguous(), freed in the forward)")
	s = b.Ew("contiguous", "pixel_shuffled", []core.Value{s}, []int64{tokens, m}, dt, "merge x merge patches side by side (pixel_shuffle's second permute().contiguous(), the projector's input)")
	defer b.Scope("multi_modal_projector")()
	s = b.LayerNorm("layer_norm", s, m, true)
	s = b.Linear("linear_1", core.RoleLinear, s, m, v.TextDim, true)
	s = Activation(b, v.ProjAct, s)
	return b.Linear("linear_2", core.RoleLinear, s, v.TextDim, v.TextDim, true)
}

// LayerScale multiplies its input by a learned per-channel weight named
// Name (InternVLVisionLayer's lambda_1 and lambda_2:
// lambda_1 * attention_output). The product saves its input for the
// weight's gradient (the weight itself, a parameter, costs nothing more);
// its dtype is the input's and the weight's promoted (fp32 under autocast
// of fp32 weights).
type LayerScale struct {
	Name string
	Dim  int64
}

func (s *LayerScale) Kind() string           { return "layer_scale" }
func (s *LayerScale) Label() string          { return s.Name }
func (s *LayerScale) DefaultName() string    { return "scale" }
func (s *LayerScale) Children() []core.Layer { return nil }
func (s *LayerScale) Params() int64          { return s.Dim }
func (s *LayerScale) InDim() int64           { return s.Dim }
func (s *LayerScale) OutDim() int64          { return s.Dim }
func (s *LayerScale) Summary() string        { return fmt.Sprintf("x a learned [%d]", s.Dim) }
func (s *LayerScale) Validate(path string) error {
	return checkPositive(path, sized{FieldDim, s.Dim})
}

func (s *LayerScale) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != s.Dim {
		panic(core.ShapeMismatch(b, "layer_scale", s.Dim, b.Last(x)))
	}
	name := b.ModuleName(s)
	w := b.Param(name, []int64{s.Dim}, core.RoleNorm)
	i := b.AddOp("mul", name, []core.Value{x}, w)
	y := b.Out(i, name, b.Shape(x), core.Promote(b.Dtype(x), b.Prec.Params), "the output scaled by "+name)
	if b.Trainable(w) {
		b.Save(i, x)
	}
	b.Op(i).Flops = float64(core.Numel(b.Shape(x)))
	b.Op(i).Bytes += float64(b.Val(x).Bytes)
	return y
}
