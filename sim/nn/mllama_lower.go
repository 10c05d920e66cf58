package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs MllamaVisionModel.forward and the projector on the plan's
// images and leaves the image states and masks in b.Cross; the text
// embeddings x pass through.
func (v *MllamaVision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "mllama_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	d, t, p, pp := v.Dim, v.Tiles, v.tokens(), v.padded()
	images := b.Batch * im.Count
	keys := im.Count * t * p // image tokens a sample
	if !core.ProductFits(images, t*pp, t*pp, 8) || !core.ProductFits(images*t, p, v.OutputDim, 8) || !core.ProductFits(b.Batch, b.Seq, keys, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"), Msg: fmt.Sprintf("%s of %s a step, with seq=%d: more than memsh simulates", units.Count(images, "image"), units.Count(t, "tile"), b.Seq), Hint: units.HintTensor}})
	}
	done := b.Scope("vision_model")
	// The processor's pixels (fp32, every tile, padding tiles included)
	// and aspect-ratio ids, on the device for the step.
	pix := v.data(b, "pixel_values", []int64{images * t * (p - 1), v.patchIn()}, units.FP32, "image tiles from the processor (fp32)")
	ids := v.data(b, "aspect_ratio_ids", []int64{images}, units.INT64, "aspect-ratio ids (int64), saved by the tile embeddings")
	// a Conv2d (RoleConv: neither LoRA's all-linear, bitsandbytes nor
	// float8 converts it)
	h := b.Linear("patch_embedding", core.RoleConv, b.Cast(pix, b.Prec.Params, "pixels in the model's dtype"), v.patchIn(), d, false)
	b.Val(h).Shape = []int64{images * t, p - 1, d}
	h = v.tileEmbedding(b, "pre_tile_positional_embedding", h, ids)
	// The class token, then the gated position embeddings.
	cls := b.Param("class_embedding", []int64{d}, core.RoleEmbed)
	c := b.AddOp("cat", "apply_class_embedding", []core.Value{h}, cls)
	h = b.Out(c, "with_class_token", []int64{images * t, p, d}, b.Dtype(h), "tile tokens with the class token")
	h = v.positionEmbedding(b, h, ids)
	h = b.LayerNorm("layernorm_pre", h, d, true)
	h = b.Ew("pad", "pad", []core.Value{h}, []int64{images, t * pp, d}, b.Dtype(h), "tile tokens padded to a multiple of 8")
	mask := v.aspectMask(b, images)
	var inter []core.Value
	keep := map[int64]bool{}
	for _, i := range v.Intermediate {
		keep[i] = true
	}
	for i := int64(0); i < v.Layers; i++ {
		h = v.encoderLayer(b, "transformer.layers."+core.Itoa(i), h, mask, false)
		if keep[i] {
			inter = append(inter, h)
		}
	}
	h = b.LayerNorm("layernorm_post", h, d, true)
	h = v.tileEmbedding(b, "post_tile_positional_embedding", h, ids)
	for i := int64(0); i < v.GlobalLayers; i++ {
		h = v.encoderLayer(b, "global_transformer.layers."+core.Itoa(i), h, mask, true)
	}
	// The padding sliced off (a view); the intermediate states stacked
	// (a copy), both concatenated (a copy the projector saves).
	outs := []core.Value{h}
	if len(inter) > 0 {
		outs = append(outs, b.Ew("stack", "intermediate_hidden_states", inter, []int64{images, t * pp, d * int64(len(inter))}, b.Dtype(h), "the intermediate layers' outputs stacked"))
	}
	cat := b.Ew("cat", "vision_output", outs, []int64{images * t * p, v.OutputDim}, b.Dtype(h), "the last hidden state and the intermediate ones, concatenated")
	done()
	states := b.Linear("multi_modal_projector", core.RoleLinear, cat, v.OutputDim, v.TextDim, true)
	b.Val(states).Shape = []int64{b.Batch, keys, v.TextDim}
	b.Cross = &core.CrossStates{States: states}
	b.Cross.Mask, b.Cross.RowMask = v.crossMasks(b, keys)
	return x
}

// data is a batch tensor the caller loads for the step.
func (v *MllamaVision) data(b *core.Builder, name string, shape []int64, dt units.DType, why string) core.Value {
	i := b.AddOp("data", name, nil)
	y := b.Out(i, name, shape, dt, why)
	b.Val(y).Grad = false
	b.P.Held = append(b.P.Held, y)
	return y
}

// gateTanh is gate.tanh() of a one-element gate: a new tensor each call,
// which tanh saves (its output).
func gateTanh(b *core.Builder, gate int32) core.Value {
	i := b.AddOp("tanh", "gate_tanh", nil, gate)
	y := b.Out(i, "gate_tanh", []int64{1}, b.Prec.Params, "tanh of a gate")
	b.Save(i, y)
	return y
}

// lookup is an nn.Embedding over the aspect-ratio ids (saved for the
// weight's gradient).
func lookup(b *core.Builder, name string, ids core.Value, rows, width int64) core.Value {
	done := b.Scope(name)
	defer done()
	w := b.Param("weight", []int64{rows, width}, core.RoleEmbed)
	i := b.AddOp("embedding", "", []core.Value{ids}, w)
	y := b.Out(i, "out", []int64{b.Shape(ids)[0], width}, b.Prec.Params, "embedding lookup output")
	if b.Trainable(w) {
		b.Save(i, ids)
	}
	b.Op(i).NoGradB = true
	return y
}

// tileEmbedding is MllamaPrecomputedAspectRatioEmbedding: one embedding
// per tile, times tanh(gate), added to every token of the tile.
func (v *MllamaVision) tileEmbedding(b *core.Builder, name string, h, ids core.Value) core.Value {
	done := b.Scope(name)
	defer done()
	e := lookup(b, "embedding", ids, v.AspectRatios+1, v.Tiles*v.Dim)
	e = b.Mul("gated", e, gateTanh(b, b.Param("gate", []int64{1}, core.RoleNorm)))
	return b.Add("add", h, e)
}

// positionEmbedding is MllamaPrecomputedPositionEmbedding: (1 -
// tanh(gate)) times the position table, then tanh(gate) times a table per
// aspect ratio.
func (v *MllamaVision) positionEmbedding(b *core.Builder, h, ids core.Value) core.Value {
	done := b.Scope("gated_positional_embedding")
	defer done()
	gate := b.Param("gate", []int64{1}, core.RoleNorm)
	pos := b.Param("embedding", []int64{v.tokens(), v.Dim}, core.RoleEmbed)
	r := b.Ew("rsub", "one_minus_tanh", []core.Value{gateTanh(b, gate)}, []int64{1}, b.Prec.Params, "1 - tanh(gate)")
	m := b.AddOp("mul", "gated_position", []core.Value{r}, pos)
	gp := b.Out(m, "gated_position", []int64{v.tokens(), v.Dim}, b.Prec.Params, "the gated position table")
	if b.Trainable(pos) {
		b.Save(m, r)
	}
	h = b.Add("add_position", h, gp)
	e := lookup(b, "tile_embedding", ids, v.AspectRatios+1, v.Tiles*v.tokens()*v.Dim)
	e = b.Mul("gated_tile", e, gateTanh(b, gate))
	return b.Add("add_tile", h, e)
}

// aspectMask is _prepare_aspect_ratio_attention_mask: [images, 1, T*Pp,
// T*Pp], built as a matmul of the tile mask with itself (a transient of
// the same size) times the dtype's minimum. Under autocast the matmul
// runs in the compute dtype, and so does the mask.
func (v *MllamaVision) aspectMask(b *core.Builder, images int64) core.Value {
	n := v.Tiles * v.padded()
	dt := b.Prec.Params
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	i := b.AddOp("mask", "aspect_ratio_mask", nil)
	m := b.Out(i, "aspect_ratio_mask", []int64{images, 1, n, n}, dt, "additive aspect-ratio attention mask, saved by every vision layer's SDPA")
	b.Val(m).Grad = false
	b.Op(i).WorkF = b.Val(m).Bytes // the matmul's product, scaled into the mask
	return m
}

// encoderLayer is MllamaVisionEncoderLayer on h [images, T*Pp, dim].
func (v *MllamaVision) encoderLayer(b *core.Builder, name string, h, mask core.Value, gated bool) core.Value {
	done := b.Scope(name)
	defer done()
	d := v.Dim
	s := b.Shape(h)
	n := b.LayerNorm("input_layernorm", h, d, true)
	closeAttn := b.Scope("self_attn")
	q := b.Linear("q_proj", core.RoleQ, n, d, d, false)
	k := b.Linear("k_proj", core.RoleK, n, d, d, false)
	val := b.Linear("v_proj", core.RoleV, n, d, d, false)
	a := &Attention{Dim: d, Heads: v.Heads, Impl: v.Impl}
	o := maskedSDPA(b, a, q, k, val, core.WithLast(s, d), mask, s[len(s)-2])
	y := b.Linear("o_proj", core.RoleO, o, d, d, false)
	closeAttn()
	if gated {
		y = b.Mul("gate_attn", y, gateTanh(b, b.Param("gate_attn", []int64{1}, core.RoleNorm)))
	}
	h = b.Add("residual", h, y)
	n = b.LayerNorm("post_attention_layernorm", h, d, true)
	y = b.Linear("mlp.fc1", core.RoleUp, n, d, v.Inter, true)
	y = Activation(b, "gelu", y)
	y = b.Linear("mlp.fc2", core.RoleDown, y, v.Inter, d, true)
	if gated {
		y = b.Mul("gate_ffn", y, gateTanh(b, b.Param("gate_ffn", []int64{1}, core.RoleNorm)))
	}
	return b.Add("residual_1", h, y)
}

// maskedSDPA is SDPA with an additive mask over keys keys a query: the
// kernel saves the mask with q, k, v, the output and the logsumexp.
func maskedSDPA(b *core.Builder, a *Attention, q, k, v core.Value, s []int64, mask core.Value, keys int64) core.Value {
	o := a.Fused(b, q, k, v, s)
	i := b.Val(o).Producer
	b.Op(i).In = append(b.Op(i).In, mask)
	b.Save(i, mask)
	b.Op(i).Flops = 4 * float64(core.Rows(s)) * float64(keys) * float64(a.Heads*a.Hd())
	return o
}

// crossMasks are _prepare_cross_attention_mask's outputs from the
// processor's int64 cross_attention_mask [batch, seq, images, tiles]: the
// additive mask [batch, 1, seq, image tokens] in the model's dtype and
// full_text_row_masked_out_mask [batch, 1, seq, 1]. On the way it makes
// the int64 mask repeated over each tile's tokens, 1.0 - it in fp32 and
// a bool copy: transients of 8 + 4 + 1 bytes an element.
func (v *MllamaVision) crossMasks(b *core.Builder, keys int64) (core.Value, core.Value) {
	batch, seq := b.Batch, b.Seq
	in := v.data(b, "cross_attention_mask", []int64{batch, seq, b.Images.Count, v.Tiles}, units.INT64, "the processor's cross-attention mask (int64)")
	i := b.AddOp("mask", "prepare_cross_attention_mask", []core.Value{in})
	m := b.Out(i, "cross_attention_mask", []int64{batch, 1, seq, keys}, b.Prec.Params, "additive cross-attention mask, saved by every cross-attention layer's SDPA")
	r := b.Out(i, "full_text_row_masked_out_mask", []int64{batch, 1, seq, 1}, b.Prec.Params, "the text rows that see an image, saved by every cross-attention layer")
	b.Val(m).Grad, b.Val(r).Grad = false, false
	b.Op(i).WorkF = (8 + 4 + 1) * batch * seq * keys
	return m, r
}
