package nn

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs Lfm2VlModel.get_image_features on the plan's images (the
// tower, the gather of each image's patch blocks, the projector) and
// joins their tokens to the text embeddings x.
func (v *Lfm2VlVision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "lfm2_vl_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	dataParallelImages(b, "LFM2-VL's", "dp, fsdp or zero")
	im := v.fitting(b)
	L, d := v.MaxPatches(), v.Dim
	n := b.Batch * b.Images.Count * int64(len(im.Patches))
	if !core.ProductFits(n, L, max(v.patchIn(), v.Inter, v.Positions, d*v.Factor*v.Factor, v.ProjHidden, v.TextDim), 8) || !core.ProductFits(n, L, L, v.Heads, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"), Msg: fmt.Sprintf("%d images of %d patches are more than memsh simulates", n, L), Hint: units.HintTensor}})
	}
	fewest := slices.Min(im.Patches)
	padded := fewest < L
	if padded && v.Impl == "flash" {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg:  fmt.Sprintf("images of %dx%d pixels are padded to %d patches (the smallest of its tiles and images has %d): flash-attn over padded patches (transformers' unpadding) is not modelled", b.Images.Height, b.Images.Width, L, fewest),
			Hint: `use attn="sdpa" or "eager"; or images the processor cuts into whole tiles of max_num_patches patches`}})
	}
	b.ReserveParams(v.tensorCount())
	done := b.Scope("vision_tower")
	h := v.embeddings(b, n, L, im)
	attn := &Attention{Name: "self_attn", Dim: d, Heads: v.Heads, QKVBias: true, OutBias: true, Impl: v.Impl, OutName: "out_proj", SoftmaxFP32: true}
	if padded {
		v.mask(b, attn, n, L, b.Dtype(h))
	}
	layer := preNormLayer(&Norm{Name: "layer_norm1", Dim: d, Bias: true}, attn, &Norm{Name: "layer_norm2", Dim: d, Bias: true},
		&MLP{Name: "mlp", Dim: d, Hidden: v.Inter, Act: v.Act, Bias: true})
	h = b.LowerChild(&core.Repeat{Name: "encoder.layers", Layer: layer, N: v.Layers}, h)
	h = b.LayerNorm("post_layernorm", h, d, true)
	done()
	if features := b.Batch * b.Images.Count * im.Features; v.Before524 {
		h = v.projectEach(b, h, im, features)
	} else {
		h = v.project(b, h, n, L, features)
	}
	return joinImageFeatures(b, x, h)
}

// fitting is the plan's image as the processor lays it out; its tokens
// must fit the sequence, and the model's image features must be the
// processor's image tokens.
func (v *Lfm2VlVision) fitting(b *core.Builder) Lfm2VlImage {
	ims := b.Images
	im := v.Image(ims.Height, ims.Width)
	l := im.Layout
	if l.Split && l.Rows*l.Cols == 1 && im.Features != im.TextTokens-2*boolInt(!v.Proc.NoTags) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("images of %dx%d pixels are split into one tile of %d pixels (%d image features) but Lfm2VlProcessor writes the tokens of the %dx%d resized image: the model raises (image features and image tokens do not match)",
				ims.Height, ims.Width, v.Proc.Tile, im.Features, l.H, l.W),
			Hint: "set min_tiles to 2 or more (the processor's default), or do_image_splitting to false"}})
	}
	if most := slices.Max(im.Patches); most > v.MaxPatches() {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("images of %dx%d pixels are resized to %dx%d pixels, %d patches, more than the %d every image is padded to: the processor cannot pad it and transformers raises (resize_positional_embeddings: \"exceed max_length\")",
				ims.Height, ims.Width, l.H, l.W, most, v.MaxPatches()),
			Hint: "smart_resize keeps each side at least patch x downsample_factor pixels, which an aspect ratio this extreme overruns: crop or pad the images nearer square"}})
	}
	if tokens := ims.Count * im.TextTokens; tokens > b.Seq {
		grid := "one image of " + fmt.Sprintf("%dx%d pixels", l.H, l.W)
		if l.Split {
			grid = fmt.Sprintf("%dx%d tiles of %d pixels", l.Rows, l.Cols, v.Proc.Tile)
			if int64(len(im.Patches)) > l.Rows*l.Cols {
				grid += fmt.Sprintf(" and a %dx%d thumbnail", l.H, l.W)
			}
		}
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("%s of %dx%d pixels: %s an image (Lfm2VlImageProcessor), %d tokens an image with their tags, %d a sample, more than seq=%d",
				units.Count(ims.Count, "image"), ims.Height, ims.Width, grid, im.TextTokens, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, use fewer images, or lower max_image_tokens or max_tiles (processor=)"}})
	}
	return im
}

func boolInt(t bool) int64 {
	if t {
		return 1
	}
	return 0
}

// embeddings is Siglip2VisionEmbeddings on n images of L patches: the
// processor's fp32 pixels (and its int32 patch mask and int64 spatial
// shapes), patch_embedding over the pixels in the weights' dtype (which
// it saves), plus the position grid resized to each image.
func (v *Lfm2VlVision) embeddings(b *core.Builder, n, L int64, im Lfm2VlImage) core.Value {
	defer b.Scope("embeddings")()
	d, pin := v.Dim, v.patchIn()
	pix := imagePixels(b, "pixel_values", n*L, pin, n*L*pin, fmt.Sprintf("fp32 [%d, %d, %d], padded patches zero", n, L, pin))
	for _, in := range []struct {
		name  string
		shape []int64
		dt    units.DType
		why   string
	}{
		{"pixel_attention_mask", []int64{n, L}, units.INT32, "the processor's patch mask (int32, one a real patch: do_pad)"},
		{"spatial_shapes", []int64{n, 2}, units.INT64, "each image's patches high and wide (int64)"},
	} {
		op := b.AddOp("data", in.name, nil)
		y := b.Out(op, in.name, in.shape, in.dt, in.why)
		b.Val(y).Grad = false
		b.P.Held = append(b.P.Held, y)
	}
	h := b.Linear("patch_embedding", core.RoleLinear, pix, pin, d, true) // Siglip2's nn.Linear: all-linear, bitsandbytes and float8 reach it
	b.Val(h).Shape = []int64{n, L, d}
	var pos core.Value
	if v.Before524 {
		pos = v.interpolatedPositions(b, n, L, im)
	} else {
		pos = v.resizedPositions(b, n, L)
	}
	a := b.AddOp("add", "add_position_embedding", []core.Value{h, pos})
	y := b.Out(a, "embeddings", []int64{n, L, d}, core.Promote(b.Dtype(h), b.Dtype(pos)), "the patch embeddings plus their resized positions")
	b.Op(a).Flops = float64(n * L * d)
	return y
}

// resizedPositions is resize_positional_embeddings: each output position's
// antialiased bilinear weights over the grid (fp32 [n x L, Positions]; the
// per-axis weights [n, L, 2, side] before their outer product are
// transients of the op), times the grid's rows in fp32 (.float(): a copy
// of a bf16 grid), the product [n, L, Dim] fp32 cast to the weights'
// dtype. The matmul saves the weight matrix for the grid's gradient.
func (v *Lfm2VlVision) resizedPositions(b *core.Builder, n, L int64) core.Value {
	d, g := v.Dim, v.Positions
	r := b.AddOp("resize_weights", "resize_weights", nil)
	wts := b.Out(r, "resize_weights", []int64{n * L, g}, units.FP32, "each patch's bilinear weights over the position grid (fp32), saved by the matmul")
	b.Val(wts).Grad = false
	b.Op(r).NoGradB = true
	b.Op(r).WorkF = units.FP32.Bytes(2 * 2 * n * L * v.gridSide())
	w := b.Param("position_embedding.weight", []int64{g, d}, core.RoleEmbed)
	m := b.AddOp("matmul", "resize_positional_embeddings", []core.Value{wts}, w)
	if b.Prec.Params != units.FP32 {
		b.Op(m).WorkF += units.FP32.Bytes(g * d) // the grid's .float() copy
	}
	pos := b.Out(m, "resized_positions", []int64{n, L, d}, units.FP32, "the position grid resized to each image (fp32)")
	b.Save(m, wts)
	b.Op(m).NoGradB = true
	b.Op(m).Flops = 2 * float64(n*L) * float64(g) * float64(d)
	return b.Cast(pos, b.Prec.Params, "the resized positions in the grid's dtype (.to(positional_embeddings.dtype))")
}

// mask is create_bidirectional_mask over padded images: under SDPA one
// bool mask [n, 1, L, L] a forward, which each layer's SDPA converts into
// an additive bias in dt and saves (convert_boolean_attn_mask; on CUDA
// padded to a multiple of 8 keys when L is not one: kernelBias); under
// eager attention one mask in dt, added to every layer's scores.
func (v *Lfm2VlVision) mask(b *core.Builder, attn *Attention, n, L int64, dt units.DType) {
	shape := []int64{n, 1, L, L}
	mdt := units.BOOL
	if v.Impl == "eager" {
		mdt = dt
	}
	i := b.AddOp("mask", "encoder_attention_mask", nil)
	m := b.Out(i, "encoder_attention_mask", shape, mdt, "the padded patches masked out of every image's attention (create_bidirectional_mask, once a forward)")
	b.Val(m).Grad = false
	b.Op(i).NoGradB = true
	if v.Impl == "eager" {
		attn.bias = func(*core.Builder) core.Value { return m }
		return
	}
	attn.chunkMask = true
	attn.bias = func(b *core.Builder) core.Value {
		c := b.AddOp("where", "attn_bias", []core.Value{m})
		y := b.Out(c, "attn_bias", shape, dt, "the mask as SDPA's additive bias (convert_boolean_attn_mask, each layer; saved by the kernel)")
		b.Val(y).Grad = false
		b.Op(c).NoGradB = true
		b.Op(c).Bytes += float64(b.Val(m).Bytes)
		return kernelBias(b, y)
	}
}

// project is get_image_features after the tower on h ([n, L, Dim]): the
// gather of every image's Factor x Factor blocks into one grid, the
// projector over all n x L / Factor² slots, the padding slots dropped
// (features real ones remain) and the images' tokens concatenated:
// [features, TextDim].
func (v *Lfm2VlVision) project(b *core.Builder, h core.Value, n, L, features int64) core.Value {
	f := v.Factor
	slots, u := n*L/(f*f), v.Dim*f*f
	dt := b.Dtype(h)
	_, h = indexCopy(b, "patch_index", h, n*L)
	b.Val(h).Shape = []int64{f, n * L / f, v.Dim}
	defer b.Scope("multi_modal_projector")()
	h = b.Ew("contiguous", "pixel_unshuffle", []core.Value{h}, []int64{1, 1, slots, u}, dt,
		"factor² neighbouring patches side by side (pixel_unshuffle's reshape of a permuted view: a contiguous copy)")
	if v.ProjNorm {
		h = b.LayerNorm("layer_norm", h, u, true)
	}
	h = b.Linear("linear_1", core.RoleLinear, h, u, v.ProjHidden, v.ProjBias)
	h = Activation(b, v.ProjAct, h)
	h = b.Linear("linear_2", core.RoleLinear, h, v.ProjHidden, v.TextDim, v.ProjBias)
	k := b.AddOp("index", "is_token", []core.Value{h})
	mask := b.Out(k, "is_token", []int64{slots}, units.BOOL, "which slots are an image's tokens (bool), saved by the boolean index")
	b.Val(mask).Grad = false
	y := b.Out(k, "image_features", []int64{features, v.TextDim}, b.Dtype(h), "the real slots' tokens (a boolean index: a copy)")
	b.Save(k, mask)
	b.Op(k).Bytes = float64(b.Val(h).Bytes + b.Val(y).Bytes)
	return b.Ew("cat", "image_features_cat", []core.Value{y}, []int64{features, v.TextDim}, b.Dtype(y),
		"the images' tokens concatenated (torch.cat of pooler_output in Lfm2VlModel.forward, a copy; masked_scatter's source)")
}
