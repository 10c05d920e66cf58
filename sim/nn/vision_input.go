package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// What the Qwen2.5-VL, Qwen3-VL and Kimi K2.5 towers share around their
// blocks: the processor's pixel patches, the 2-D rotary tables, the
// index copies that reorder patches and the image (or video) tokens
// joined to the text.

// imagePatches checks that the tower's widest tensor (in's patches, perImage
// a frame, x widest) fits, then makes the processor's pixel patches in dt
// (the Qwen processors' fp32; Kimi K2.5's in the model's dtype), held on
// the device for the step. The caller has checked that in's tokens fit
// the sequence.
func imagePatches(b *core.Builder, in visualInput, perImage, patchIn, widest int64, dt units.DType) (patches int64, pix core.Value) {
	patches = b.Batch * in.frames * perImage
	if !core.ProductFits(patches, patchIn, 4) || !core.ProductFits(patches, widest, 4) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: fmt.Sprintf("%d %s patches are more than memsh simulates", patches, in.kind), Hint: units.HintTensor}})
	}
	d := b.AddOp("data", in.pixels(), nil)
	pix = b.Out(d, in.pixels(), []int64{patches, patchIn}, dt, b.Concat(in.kind, " patches from the processor (", dt.String(), ")"))
	b.Val(pix).Grad = false
	b.P.Held = append(b.P.Held, pix)
	return patches, pix
}

// rotaryTables is the op (named name) making cos and sin of the 2-D
// rotary angles, fp32, one row of hd a patch.
func rotaryTables(b *core.Builder, name string, patches, hd int64) (cos, sin core.Value) {
	r := b.AddOp("rotary", name, nil)
	cos = b.Out(r, "rotary_cos", []int64{patches, hd}, units.FP32, "2-D rotary cos table (fp32), saved by every block's rope")
	sin = b.Out(r, "rotary_sin", []int64{patches, hd}, units.FP32, "2-D rotary sin table (fp32), saved by every block's rope")
	b.Val(cos).Grad, b.Val(sin).Grad = false, false
	return cos, sin
}

// saveRopeTables saves a tower's rope tables cos and sin, which every
// block's rope keeps and which live until the first block's backward,
// with anchor, the op before the blocks whose backward runs just after
// it. Under LoRA the op before the blocks may have no backward (a frozen
// patch or position embedding over inputs needing no gradient) while the
// blocks' ropes have one (their q and k come from adapted projections):
// then the tables go with the first of the blocks' ops, from blocksFrom
// on, that has a backward, which runs after the first rope's (PyTorch
// keeps them then: tools/oracle/qwen2vl.py with lora).
func saveRopeTables(b *core.Builder, anchor, blocksFrom int32, cos, sin core.Value) {
	if b.P.HasBackward(b.Op(anchor)) {
		b.Save(anchor, cos, sin)
		return
	}
	for i := blocksFrom; i < int32(len(b.P.Ops)); i++ {
		if b.P.HasBackward(b.Op(i)) && len(b.Op(i).Out) > 0 {
			b.Save(i, cos, sin)
			return
		}
	}
}

// joinImageTokens puts the image tokens h in place of the placeholders of
// the text embeddings x (masked_scatter), and returns the joined
// embeddings and the placeholder mask the scatter saves.
func joinImageTokens(b *core.Builder, x, h core.Value) (y, mask core.Value) {
	return joinTokens(b, x, h, "image")
}

// joinImageFeatures is how a tower's image tokens h reach the text:
// cast to the text embeddings' dtype where it differs
// (image_features.to(inputs_embeds.dtype)), then joinImageTokens; it
// returns the joined embeddings.
func joinImageFeatures(b *core.Builder, x, h core.Value) core.Value {
	if b.Dtype(h) != b.Dtype(x) {
		h = b.Cast(h, b.Dtype(x), "the image tokens in the text embeddings' dtype (image_features.to(inputs_embeds.dtype))")
	}
	y, _ := joinImageTokens(b, x, h)
	return y
}

// joinTokens is joinImageTokens for the tokens of kind ("image" or
// "video": input_ids == video_token_id).
func joinTokens(b *core.Builder, x, h core.Value, kind string) (y, mask core.Value) {
	ids := b.P.Input
	var ins []core.Value
	if ids != core.NoValue {
		ins = append(ins, ids)
	}
	mk := b.AddOp("eq", kind+"_mask", ins)
	mask = b.Out(mk, kind+"_mask", b.Shape(x)[:len(b.Shape(x))-1], units.BOOL, b.Concat(kind, " placeholder positions (input_ids == ", kind, "_token_id)"))
	b.Val(mask).Grad = false
	b.Op(mk).NoGradB = true
	j := b.AddOp("masked_scatter", "join_"+kind+"_tokens", []core.Value{x, h, mask})
	y = b.Out(j, "inputs_embeds", b.Shape(x), core.Promote(b.Dtype(x), b.Dtype(h)), b.Concat("text embeddings with the ", kind, " tokens in place"))
	b.Save(j, mask)
	return y, mask
}

// indexCopy is x[index] over groups of rows: a copy of x whose backward
// keeps the int64 index (one a group; Qwen2.5-VL's window order, Kimi
// K2.5's merge index).
func indexCopy(b *core.Builder, name string, x core.Value, groups int64) (int32, core.Value) {
	k := b.AddOp("index", name, []core.Value{x})
	idx := b.Out(k, name, []int64{groups}, units.INT64, "the order of the patches (int64), saved by the index")
	b.Val(idx).Grad = false
	y := b.Out(k, name+".out", b.Shape(x), b.Dtype(x), "the patches reordered")
	b.Save(k, idx)
	b.Op(k).Bytes = float64(2 * b.Val(x).Bytes)
	return k, y
}

// imagePixels is the processor's fp32 pixel values (name: pixel_values,
// or pixel_values_videos), rows of patchIn
// (desc says their shape as the processor makes them), held to the end of
// the forward, cast to the weights' dtype (the copy the patch convolution
// saves). whole is the values in the processor's tensor: more than rows x
// patchIn when the patch does not divide the image (SigLIP's 384 pixels
// in patches of 14: the convolution's stride leaves the last 6 pixels
// unread, but the tensor and the copy it saves hold them).
func imagePixels(b *core.Builder, name string, rows, patchIn, whole int64, desc string) core.Value {
	op := b.AddOp("data", name, nil)
	pix := b.Out(op, name, []int64{rows, patchIn}, units.FP32, "images from the processor ("+desc+")")
	b.Val(pix).Grad = false
	b.Val(pix).Bytes = units.FP32.Bytes(whole)
	b.P.Held = append(b.P.Held, pix)
	x := b.Cast(pix, b.Prec.Params, "the images in the weights' dtype (pixel_values.to(patch_embedding.weight.dtype))")
	b.Val(x).Bytes = b.Dtype(x).Bytes(whole)
	return x
}

// addPositions adds a learned position embedding of rows positions
// (position_embedding, looked up by the position_ids buffer) to h ([n,
// rows, d]).
func addPositions(b *core.Builder, h core.Value, n, rows, d int64) core.Value {
	w := b.Param("position_embedding.weight", []int64{rows, d}, core.RoleEmbed)
	e := b.AddOp("embedding", "position_embedding", nil, w)
	pos := b.Out(e, "position_embedding", []int64{rows, d}, b.Prec.Params, "the position embeddings (one row a position)")
	b.Op(e).NoGradB = true
	a := b.AddOp("add", "add_position_embedding", []core.Value{h, pos})
	y := b.Out(a, "embeddings", []int64{n, rows, d}, core.Promote(b.Dtype(h), b.Dtype(pos)), "the embeddings plus their positions")
	b.Op(a).Flops = float64(n * rows * d)
	return y
}
