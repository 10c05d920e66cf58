package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs Kimi_K25VisionModel.forward and the projector on the plan's
// images (Kimi_K25Model.get_image_features) and joins their tokens to the
// text embeddings x.
func (v *KimiVision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "kimi_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	dataParallelImages(b, "Kimi K2.5's", "dp, fsdp or zero, with ep for the text model's experts")
	gh, gw := v.grid(im.Height, im.Width)
	perImage, d := gh*gw, v.Dim
	if tokens := im.Count * perImage / (v.Merge * v.Merge); tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg: fmt.Sprintf("%s of %dx%d pixels: %dx%d patches an image (Kimi_K25ImageProcessor: at most %d patches, padded to a multiple of %d pixels a side), %d image tokens a sample, more than seq=%d",
				units.Count(im.Count, "image"), im.Height, im.Width, gh, gw, v.MaxPatches, v.Patch*v.Merge, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images"}})
	}
	b.ReserveParams(v.Layers*16 + 11)
	done := b.Scope("vision_tower")
	// The processor's pixel patches, in the model's dtype.
	patches, pix := imagePatches(b, imageInput(b), perImage, v.patchIn(), max(v.Inter, v.mergedDim(), kimiTaps), b.Prec.Params)
	h := b.Linear("patch_embed.proj", core.RoleConv, pix, v.patchIn(), d, true)
	h, bag := v.posEmb(b, h, patches)
	// rotary_emb: cos and sin of the 2-D axial angles, fp32; they live
	// until the first layer's backward, which runs just before the
	// position embedding's: saved with it.
	cos, sin := rotaryTables(b, "rotary_emb", patches, v.headDim())
	b.Save(bag, cos, sin)
	attn := &Attention{Name: "attn", Dim: d, Heads: v.Heads, QKVBias: true, OutBias: true, Impl: v.Impl, OutName: "proj",
		Rope: true, SoftmaxFP32: true, Window: perImage, ChunkCat: true}
	layer := preNormLayer(&Norm{Name: "norm1", Dim: d, Bias: true}, attn, &Norm{Name: "norm2", Dim: d, Bias: true},
		&MLP{Name: "mlp", Dim: d, Hidden: v.Inter, Act: v.Act, Bias: true})
	h = b.LowerChild(&core.Repeat{Name: "layers", Layer: layer, N: v.Layers}, h)
	h = b.LayerNorm("final_layernorm", h, d, true)
	h = v.temporalMerge(b, h, patches)
	done()
	pd := b.Scope("mm_projector")
	h = b.LayerNorm("pre_norm", h, v.ProjDim, true)
	tokens, m := patches/(v.Merge*v.Merge), v.mergedDim()
	b.Val(h).Shape = []int64{tokens, m}
	h = b.Linear("in_proj", core.RoleLinear, h, m, m, true)
	h = Activation(b, "gelu", h)
	h = b.Linear("out_proj", core.RoleLinear, h, m, v.TextDim, true)
	pd()
	return joinImageFeatures(b, x, h)
}

// posEmb adds patch_embed.pos_emb: F.embedding_bag over the 16 bicubic
// taps of each patch (mode "sum", the taps' weights in the table's
// dtype), plus the fp32 temporal row, cast to the hidden states' dtype.
// It returns the op whose backward runs last in the tower.
func (v *KimiVision) posEmb(b *core.Builder, h core.Value, patches int64) (core.Value, int32) {
	defer b.Scope("patch_embed.pos_emb")()
	taps := patches * kimiTaps
	g := b.AddOp("interp", "interpolation_indices", nil)
	idx := b.Out(g, "interp_indices", []int64{taps}, units.INT64, "the bicubic taps of each patch into the position grid (int64), saved by embedding_bag")
	wts := b.Out(g, "interp_weights", []int64{taps}, b.Prec.Params, "the taps' bicubic weights in the table's dtype, saved by embedding_bag")
	offs := b.Out(g, "offsets", []int64{patches}, units.INT64, "each patch's first tap (int64), saved by embedding_bag")
	b.Val(idx).Grad, b.Val(wts).Grad, b.Val(offs).Grad = false, false, false
	w := b.Param("position_embeddings", []int64{v.PosH, v.PosW, v.Dim}, core.RoleEmbed)
	e := b.AddOp("embedding_bag", "embedding_bag", []core.Value{idx, wts, offs}, w)
	pos := b.Out(e, "out", []int64{patches, v.Dim}, b.Prec.Params, "the position grid resampled to the image (the taps' weighted sum)")
	bag := b.Out(e, "bag_size", []int64{patches}, units.INT64, "embedding_bag's bag sizes (int64, saved)")
	maxIdx := b.Out(e, "max_indices", []int64{patches}, units.INT64, "embedding_bag's max indices (int64, saved; unused by mode sum)")
	b.Val(bag).Grad, b.Val(maxIdx).Grad = false, false
	b.Save(e, idx, wts, offs, bag, maxIdx)
	b.Op(e).NoGradB = true
	b.Op(e).Flops = float64(2 * taps * v.Dim)
	v.timeBuffer(b, "")
	t := b.AddOp("index", "time_position_embeddings", nil)
	row := b.Out(t, "time_rows", []int64{patches, v.Dim}, units.FP32, "the temporal sinusoid's row of each patch (fp32; zero for an image)")
	b.Val(row).Grad = false
	p := b.Ew("add", "add_time", []core.Value{pos, row}, []int64{patches, v.Dim}, core.Promote(b.Prec.Params, units.FP32), "spatial plus temporal position embedding")
	if b.Dtype(p) != b.Dtype(h) {
		p = b.Cast(p, b.Dtype(h), "the position embedding in the hidden states' dtype")
	}
	return b.Add("add_pos_emb", h, p), e
}

// temporalMerge groups Merge x Merge neighbouring patches side by side
// and averages them over the image's one frame: pre_norm's input.
//   - IndexAddMerge (transformers 5.24 and later,
//     Kimi_K25VisionModel.temporal_merge): new_zeros in fp32, then
//     index_add_ of hidden_states.float() * frame_weight[:, None] at
//     destination_index, cast back to the hidden states' dtype. The
//     product keeps frame_weight (fp32, one a patch), and
//     IndexAddBackward0 the index and the whole fp32 product (its
//     formula reads expand_as(source)); the zeros index_add_ writes
//     into stand as the op's output.
//   - before (5.17.0 to 5.23.0): hidden_states[merge_index], an index
//     copy that keeps its int64 index, then .mean(dim=1), a copy.
func (v *KimiVision) temporalMerge(b *core.Builder, h core.Value, patches int64) core.Value {
	if !v.IndexAddMerge {
		_, h = indexCopy(b, "merge_index", h, patches)
		return b.Ew("mean", "pooler_output", []core.Value{h}, b.Shape(h), b.Dtype(h), "the merged patches averaged over the frame (pre_norm's input)")
	}
	dt := b.Dtype(h)
	g := b.AddOp("index", "temporal_merge_index", nil)
	idx := b.Out(g, "destination_index", []int64{patches}, units.INT64, "each patch's slot among the merged tokens (int64), saved by index_add_")
	fw := b.Out(g, "frame_weight", []int64{patches, 1}, units.FP32, "1 / frames of each patch's clip (fp32), saved by the product")
	b.Val(idx).Grad, b.Val(fw).Grad = false, false
	src := b.Mul("frame_weighted", b.Cast(h, units.FP32, "hidden_states.float()"), fw)
	ia := b.AddOp("index_add", "index_add", []core.Value{src, idx})
	pooled := b.Out(ia, "pooled_states", b.Shape(h), units.FP32, "the merged patches averaged over the frames (new_zeros in fp32, index_add_-ed)")
	b.Save(ia, src, idx)
	b.Op(ia).Flops = float64(core.Numel(b.Shape(h)))
	b.Op(ia).Bytes = 3 * float64(b.Val(src).Bytes)
	return b.Cast(pooled, dt, "the pooled patches in the hidden states' dtype (pre_norm's input)")
}
