package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gemma4UnifiedVision is Gemma 4 unified's encoder-free vision embedder
// as transformers 5.25.0 runs it (models/gemma4_unified/
// modeling_gemma4_unified.py: Gemma4UnifiedVisionEmbedder,
// Gemma4UnifiedMultimodalEmbedder, Gemma4UnifiedModel.get_image_features),
// named as its module tree (model.embed_vision). It has no vision tower:
//
//   - the processor (Gemma4UnifiedImageProcessor) resizes each image as
//     Gemma 4's does (Gemma4VisionTower.Resized), cuts it into Patch x
//     Patch patches, merges each Pool x Pool of them into one patch of
//     (Pool x Patch)² x 3 values (patches_merge) and pads the merged
//     patches to MaxSoftTokens with positions -1: every image runs
//     MaxSoftTokens patches, whatever its size;
//   - patch_ln1 (LayerNorm over the patch values), patch_dense (with
//     bias) to EmbedDim, patch_ln2; the pixels first cast to the weights'
//     dtype (a new tensor in bf16; fp32 pixels are used as they are);
//   - pos_embedding [Positions, 2, EmbedDim] indexed by each patch's
//     clamped (x, y) and the axis (saving both index tensors), times the
//     validity (positions != -1, in the table's dtype, saved), summed
//     over the axis, added; pos_norm (LayerNorm);
//   - multimodal_embedder: a weightless Gemma 4 RMSNorm and
//     embedding_projection (no bias) to the language model's width;
//   - the padding patches dropped (a boolean index saving its mask), the
//     images' tokens concatenated (torch.cat, a copy) in the text's
//     dtype and put in place of the image placeholders (masked_scatter).
//
// The images come from train(images=(count, height, width)); without
// them the weights are registered and nothing runs. Videos (the same
// embedder over frames) are not modelled.
type Gemma4UnifiedVision struct {
	Patch         int64 // patch_size
	Pool          int64 // pooling_kernel_size
	EmbedDim      int64 // mm_embed_dim (output_proj_dims, which must equal it)
	Positions     int64 // mm_posemb_size
	MaxSoftTokens int64 // the processor's max_soft_tokens (vision_soft_tokens_per_image)
	TextDim       int64 // the language model's hidden_size
}

func (v *Gemma4UnifiedVision) Kind() string           { return "gemma4_unified_vision" }
func (v *Gemma4UnifiedVision) Label() string          { return "" }
func (v *Gemma4UnifiedVision) Children() []core.Layer { return nil }
func (v *Gemma4UnifiedVision) InDim() int64           { return v.TextDim }
func (v *Gemma4UnifiedVision) OutDim() int64          { return v.TextDim }
func (v *Gemma4UnifiedVision) ReadsImages() bool      { return true }

// PatchDim is a merged patch's values: (Pool x Patch)² x 3.
func (v *Gemma4UnifiedVision) PatchDim() int64 { return 3 * v.Patch * v.Patch * v.Pool * v.Pool }

// weights is every parameter under model.embed_vision.
func (v *Gemma4UnifiedVision) weights(each tensorFn) {
	p, d := v.PatchDim(), v.EmbedDim
	each("embed_vision.patch_ln1.weight", []int64{p}, core.RoleNorm)
	each("embed_vision.patch_ln1.bias", []int64{p}, core.RoleNorm)
	each("embed_vision.patch_dense.weight", []int64{d, p}, core.RoleLinear)
	each("embed_vision.patch_dense.bias", []int64{d}, core.RoleLinear)
	each("embed_vision.patch_ln2.weight", []int64{d}, core.RoleNorm)
	each("embed_vision.patch_ln2.bias", []int64{d}, core.RoleNorm)
	each("embed_vision.pos_embedding", []int64{v.Positions, 2, d}, core.RoleEmbed)
	each("embed_vision.pos_norm.weight", []int64{d}, core.RoleNorm)
	each("embed_vision.pos_norm.bias", []int64{d}, core.RoleNorm)
	each("embed_vision.multimodal_embedder.embedding_projection.weight", []int64{v.TextDim, d}, core.RoleLinear)
}

func (v *Gemma4UnifiedVision) Params() int64             { return countTensors(v.weights, "") }
func (v *Gemma4UnifiedVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.weights) }

func (v *Gemma4UnifiedVision) Summary() string {
	return fmt.Sprintf("patches of %d merged %d x %d, -> %d -> %d, %d soft tokens an image", v.Patch, v.Pool, v.Pool, v.EmbedDim, v.TextDim, v.MaxSoftTokens)
}

func (v *Gemma4UnifiedVision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldPatch, v.Patch}, sized{FieldMerge, v.Pool}, sized{FieldDim, v.EmbedDim},
		sized{FieldPositions, v.Positions}, sized{FieldSoftTokens, v.MaxSoftTokens}, sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	return checkBounds(path, bounded{FieldDim, v.EmbedDim, 1 << 20}, bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldMerge, v.Pool, 1 << 6},
		bounded{FieldPositions, v.Positions, 1 << 24}, bounded{FieldSoftTokens, v.MaxSoftTokens, 1 << 20})
}

// ImageTokens is the soft tokens one image of h x w pixels adds to a
// sample: Gemma 4's resize (Gemma4UnifiedImageProcessor keeps
// Gemma4ImageProcessor's aspect_ratio_preserving_resize), one token a
// merged patch (0 where the processor refuses it).
func (v *Gemma4UnifiedVision) ImageTokens(h, w int64) int64 {
	g := &Gemma4VisionTower{Patch: v.Patch, Pool: v.Pool, MaxSoftTokens: v.MaxSoftTokens}
	return g.ImageTokens(h, w)
}

// Lower runs the embedder as Gemma4UnifiedModel.get_image_features does
// and joins its soft tokens to the text embeddings x.
func (v *Gemma4UnifiedVision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, v.Kind(), v.TextDim, x, func(b *core.Builder) { registerTensors(b, 10, v.weights) }) {
		return x
	}
	im := b.Images
	perImage := v.ImageTokens(im.Height, im.Width)
	if perImage == 0 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("embed_vision"),
			Msg: fmt.Sprintf("Gemma4UnifiedImageProcessor cannot resize a %dx%d image to at most %d patches of %d pixels", im.Height, im.Width,
				v.MaxSoftTokens*v.Pool*v.Pool, v.Patch),
			Hint: "its aspect ratio is too far from square for the patch budget: give images closer to square"}})
	}
	if tokens := im.Count * perImage; tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("embed_vision"),
			Msg:  fmt.Sprintf("%s of %dx%d pixels: %d image tokens a sample, more than seq=%d", units.Count(im.Count, "image"), im.Height, im.Width, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images"}})
	}
	n, l, d := b.Batch*im.Count, v.MaxSoftTokens, v.EmbedDim
	if !core.ProductFits(n*l, max(v.PatchDim(), 2*d, v.TextDim), 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("embed_vision"), Msg: fmt.Sprintf("%d image patches are more than memsh simulates", n*l), Hint: units.HintTensor}})
	}
	defer b.Scope("embed_vision")()
	dt := b.AddOp("data", "pixel_values", nil)
	pix := b.Out(dt, "pixel_values", []int64{n, l, v.PatchDim()}, units.FP32, "merged image patches from the processor, padded (fp32)")
	pos := b.Out(dt, "image_position_ids", []int64{n, l, 2}, units.INT64, "each merged patch's (x, y), -1 on padding (int64)")
	b.Val(pix).Grad, b.Val(pos).Grad = false, false
	b.P.Held = append(b.P.Held, pix, pos)
	h := pix
	if b.Prec.Params != units.FP32 { // pixel_values.to(patch_dense.weight.dtype)
		h = b.Cast(h, b.Prec.Params, "pixel patches in patch_dense's dtype")
	}
	h = b.LayerNorm("patch_ln1", h, v.PatchDim(), true)
	h = b.Linear("patch_dense", core.RoleLinear, h, v.PatchDim(), d, true)
	h = b.LayerNorm("patch_ln2", h, d, true)
	h = b.Add("positions_added", h, v.positions(b, pos, n, l))
	h = b.LayerNorm("pos_norm", h, d, true)
	func() {
		defer b.Scope("multimodal_embedder")()
		h = gemma4Norm(b, "embedding_pre_projection_norm", h, d, false)
		h = b.Linear("embedding_projection", core.RoleLinear, h, d, v.TextDim, false)
	}()
	pm := b.AddOp("all", "non_pad_mask", []core.Value{pos})
	keep := b.Out(pm, "non_pad_mask", []int64{n, l}, units.BOOL, "real (not padding) patches, saved by the boolean index")
	b.Val(keep).Grad = false
	b.Op(pm).NoGradB = true
	ix := b.AddOp("index", "strip_padding", []core.Value{h, keep})
	h = b.Out(ix, "soft_tokens", []int64{n * perImage, v.TextDim}, b.Dtype(h), "the soft tokens without padding")
	b.Save(ix, keep)
	// torch.cat of the per-image features (a copy), in the text's dtype.
	h = b.Ew("cat", "image_features", []core.Value{h}, b.Shape(h), b.Dtype(h), "the images' soft tokens concatenated")
	return joinImageFeatures(b, x, h)
}

// positions is the factorized position embedding of the n x l patches:
// (pos_embedding[clamped, axes] * valid).sum(-2).
func (v *Gemma4UnifiedVision) positions(b *core.Builder, pos core.Value, n, l int64) core.Value {
	d := v.EmbedDim
	w := b.Param("pos_embedding", []int64{v.Positions, 2, d}, core.RoleEmbed)
	cl := b.AddOp("clamp", "clamped_positions", []core.Value{pos})
	clamped := b.Out(cl, "clamped_positions", []int64{n, l, 2}, units.INT64, "positions clamped at 0 (.long()), saved by the table's index")
	ax := b.AddOp("arange", "axes", nil)
	axes := b.Out(ax, "axes", []int64{2}, units.INT64, "torch.arange(2), the axis index, saved by the table's index")
	vl := b.AddOp("ne", "valid", []core.Value{pos})
	valid := b.Out(vl, "valid", []int64{n, l, 2, 1}, b.Prec.Params, "positions != -1 in the table's dtype, saved by the product")
	for _, i := range []int32{cl, ax, vl} {
		b.Op(i).NoGradB = true
	}
	b.Val(clamped).Grad, b.Val(axes).Grad, b.Val(valid).Grad = false, false, false
	e := b.AddOp("index", "pos_rows", []core.Value{clamped, axes}, w)
	rows := b.Out(e, "pos_rows", []int64{n, l, 2, d}, b.Prec.Params, "the table's x and y rows of each patch")
	b.Save(e, clamped, axes)
	mu := b.AddOp("mul", "pos_valid", []core.Value{rows, valid})
	rows = b.Out(mu, "pos_valid", b.Shape(rows), b.Dtype(rows), "the rows, zero on padding")
	b.Save(mu, valid)
	b.Op(mu).Flops = float64(core.Numel(b.Shape(rows)))
	s := b.AddOp("sum", "pos_embs", []core.Value{rows})
	pe := b.Out(s, "pos_embs", []int64{n, l, d}, b.Dtype(rows), "the x and y rows summed")
	b.Op(s).Flops = float64(core.Numel(b.Shape(rows)))
	return pe
}

// Gemma4UnifiedAudio is Gemma 4 unified's audio embedder, weights only
// (Gemma4UnifiedMultimodalEmbedder under model.embed_audio: a weightless
// RMSNorm and embedding_projection from audio_embed_dim raw samples a
// token to the language model's width; no audio tower). memsh models no
// audio input: train() has no knob for audio, so it runs nothing and
// only its weight (and, trained, its gradient and optimizer states) is
// counted.
type Gemma4UnifiedAudio struct {
	Dim     int64 // audio_embed_dim
	TextDim int64
}

func (a *Gemma4UnifiedAudio) Kind() string           { return "gemma4_unified_audio" }
func (a *Gemma4UnifiedAudio) Label() string          { return "" }
func (a *Gemma4UnifiedAudio) Children() []core.Layer { return nil }
func (a *Gemma4UnifiedAudio) InDim() int64           { return a.TextDim }
func (a *Gemma4UnifiedAudio) OutDim() int64          { return a.TextDim }

func (a *Gemma4UnifiedAudio) weights(each tensorFn) {
	each("embed_audio.embedding_projection.weight", []int64{a.TextDim, a.Dim}, core.RoleLinear)
}

func (a *Gemma4UnifiedAudio) Params() int64             { return countTensors(a.weights, "") }
func (a *Gemma4UnifiedAudio) Modules() []core.ModuleRow { return tensorModules(a.Kind(), a.weights) }
func (a *Gemma4UnifiedAudio) Summary() string {
	return fmt.Sprintf("%d samples a token -> %d (weights only: no audio input)", a.Dim, a.TextDim)
}

func (a *Gemma4UnifiedAudio) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, a.Dim}, sized{FieldTextDim, a.TextDim}); err != nil {
		return err
	}
	return checkBounds(path, bounded{FieldDim, a.Dim, 1 << 20})
}

// Lower registers the weight: no audio runs.
func (a *Gemma4UnifiedAudio) Lower(b *core.Builder, x core.Value) core.Value {
	registerTensors(b, 1, a.weights)
	return x
}
