package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// memEffAlignment is the keys SDPA's memory-efficient CUDA kernel needs an
// additive mask's rows aligned to: preprocess_mask pads an unaligned one
// (pad_bias<8>: a new tensor, padded, sliced back to its keys) at each call
// (aten/src/ATen/native/transformers/attention.cpp, mem_eff_alignment =
// 8; the CPU kernel reads the mask as it is).
const memEffAlignment = 8

// Lower runs PixtralVisionModel.forward and Mistral3MultiModalProjector on
// the plan's images (Mistral3Model.get_image_features) and joins their
// tokens to the text embeddings x.
func (v *PixtralVision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "pixtral_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	dataParallelImages(b, "Pixtral's", "dp, fsdp or zero")
	gh, gw := v.grid(im.Height, im.Width)
	if gh == 0 || gw == 0 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg:  fmt.Sprintf("images of %dx%d pixels are scaled to less than a pixel a side (PixtralProcessor fits the longer side to %d pixels)", im.Height, im.Width, v.Image),
			Hint: "give images= a height and width nearer each other"}})
	}
	if tokens := im.Count * v.TextTokens(im.Height, im.Width); tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("%s of %dx%d pixels: %dx%d patches an image (PixtralProcessor: the longer side at most %d pixels, each side a multiple of %d), %d image tokens a sample with their row breaks, more than seq=%d",
				units.Count(im.Count, "image"), im.Height, im.Width, gh, gw, v.Image, v.Patch*v.Merge, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images"}})
	}
	perImage, d := gh*gw, v.Dim
	patches := b.Batch * im.Count * perImage
	if !core.ProductFits(patches, max(v.patchIn(), v.Inter, v.mergedDim()), 4) || v.Impl != "flash" && !core.ProductFits(patches, patches, v.Heads, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"), Msg: fmt.Sprintf("%d image patches are more than memsh simulates", patches), Hint: units.HintTensor}})
	}
	b.ReserveParams(v.tensorCount())
	done := b.Scope("vision_tower")
	op := b.AddOp("data", "pixel_values", nil)
	pix := b.Out(op, "pixel_values", []int64{patches, v.patchIn()}, units.FP32,
		fmt.Sprintf("images from the processor (fp32 [%d, %d, %d, %d])", b.Batch*im.Count, v.Channels, gh*v.Patch, gw*v.Patch))
	b.Val(pix).Grad = false
	b.P.Held = append(b.P.Held, pix)
	pix = b.Cast(pix, b.Prec.Params, "the images in the weights' dtype (pixel_values.to(patch_conv.weight.dtype), saved by the convolution)")
	h := b.Linear("patch_conv", core.RoleConv, pix, v.patchIn(), d, false)
	h = b.Ew("cat", "patch_embeds", []core.Value{h}, []int64{1, patches, d}, b.Dtype(h), "every image's patches in one sequence (torch.cat, a copy; ln_pre's input)")
	h = b.RmsNorm("ln_pre", h, d)
	attn := &Attention{Name: "attention", Dim: d, Heads: v.Heads, Impl: v.Impl, Rope: true, RopeTables: "patch_positional_embedding", SoftmaxFP32: true}
	switch v.Impl {
	case "sdpa":
		mask := v.blockMask(b, patches, b.Dtype(h))
		attn.chunkMask = true
		attn.bias = func(b *core.Builder) core.Value { return kernelBias(b, mask) }
	case "eager":
		mask := v.blockMask(b, patches, b.Dtype(h))
		attn.bias = func(*core.Builder) core.Value { return mask }
	default:
		attn.Window = perImage // flash-attn's varlen kernel: each patch sees its image's
	}
	layer := preNormLayer(&Norm{Name: "attention_norm", Dim: d, RMS: true}, attn, &Norm{Name: "ffn_norm", Dim: d, RMS: true},
		&MLP{Name: "feed_forward", Dim: d, Hidden: v.Inter, Act: v.Act})
	h = b.LowerChild(&core.Repeat{Name: "transformer.layers", Layer: layer, N: v.Layers}, h)
	done()
	h = v.project(b, h, patches)
	return joinImageFeatures(b, x, h)
}

// blockMask is generate_block_attention_mask: one additive mask over every
// image's patches, [1, 1, patches, patches] in dt, zero within an image
// and the dtype's least value across images, made once a forward and
// handed to every layer.
func (v *PixtralVision) blockMask(b *core.Builder, patches int64, dt units.DType) core.Value {
	i := b.AddOp("mask", "block_attention_mask", nil)
	m := b.Out(i, "block_attention_mask", []int64{1, 1, patches, patches}, dt, "each image's patches attend to their image only (generate_block_attention_mask, once a forward)")
	b.Val(m).Grad = false
	b.Op(i).NoGradB = true
	return m
}

// kernelBias is the mask one SDPA call keeps: the mask itself, or on CUDA,
// when its keys are not a multiple of memEffAlignment, the padded copy
// preprocess_mask makes at each call.
func kernelBias(b *core.Builder, mask core.Value) core.Value {
	s := b.Shape(mask)
	keys := s[len(s)-1]
	if b.Rt.CPU || keys%memEffAlignment == 0 {
		return mask
	}
	padded := core.WithLast(s, (keys/memEffAlignment+1)*memEffAlignment)
	i := b.AddOp("pad", "pad_bias", []core.Value{mask})
	y := b.Out(i, "padded_bias", padded, b.Dtype(mask), "the mask padded to a multiple of 8 keys for the efficient kernel (preprocess_mask's pad_bias, each call; saved)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Op(i).Bytes += float64(b.Val(mask).Bytes)
	return y
}

// project is Mistral3MultiModalProjector (or with Llava,
// LlavaMultiModalProjector: no norm, no merger) on the tower's last hidden
// state h ([1, patches, Dim]), then the image features concatenated into
// one tensor (Mistral3Model.forward's torch.cat, LlavaModel.forward's):
// [tokens, TextDim].
func (v *PixtralVision) project(b *core.Builder, h core.Value, patches int64) core.Value {
	defer b.Scope("multi_modal_projector")()
	d := v.Dim
	tokens := patches / (v.Merge * v.Merge)
	if !v.Llava {
		h = v.merge(b, h, tokens)
	}
	h = b.Linear("linear_1", core.RoleLinear, h, d, v.TextDim, v.ProjBias)
	h = Activation(b, v.ProjAct, h)
	h = b.Linear("linear_2", core.RoleLinear, h, v.TextDim, v.TextDim, v.ProjBias)
	return b.Ew("cat", "image_features", []core.Value{h}, []int64{tokens, v.TextDim}, b.Dtype(h), "the images' tokens concatenated (torch.cat in the model's forward, a copy; masked_scatter's source)")
}

// merge is Mistral3MultiModalProjector's norm and patch_merger on h:
// [tokens, Dim].
func (v *PixtralVision) merge(b *core.Builder, h core.Value, tokens int64) core.Value {
	d, m := v.Dim, v.mergedDim()
	h = b.RmsNorm("norm", h, d)
	dt := b.Dtype(h)
	func() {
		defer b.Scope("patch_merger")()
		u := b.Ew("unfold", "unfold", []core.Value{h}, []int64{tokens, m}, dt, "each image's merge x merge neighbouring patches side by side (F.unfold, a copy)")
		h = b.Ew("cat", "merged", []core.Value{u}, []int64{tokens, m}, dt, "the images' unfolded patches concatenated (torch.cat, a copy; merging_layer's input)")
		h = b.Linear("merging_layer", core.RoleLinear, h, m, d, false)
	}()
	return h
}
