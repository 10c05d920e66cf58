package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs the tower as Gemma4Model.get_image_features does and joins
// its soft tokens to the text embeddings x.
func (v *Gemma4VisionTower) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "gemma4_vision_tower", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	perImage := v.ImageTokens(im.Height, im.Width)
	if perImage == 0 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg:  fmt.Sprintf("Gemma4ImageProcessor cannot resize a %dx%d image to at most %d patches of %d pixels", im.Height, im.Width, v.MaxPatches(), v.Patch),
			Hint: "its aspect ratio is too far from square for the patch budget: give images closer to square"}})
	}
	if tokens := im.Count * perImage; tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg:  fmt.Sprintf("%s of %dx%d pixels: %d image tokens a sample, more than seq=%d", units.Count(im.Count, "image"), im.Height, im.Width, tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images"}})
	}
	n, p := b.Batch*im.Count, v.MaxPatches()
	if !core.ProductFits(n*p, max(v.patchIn(), v.Inter, v.Heads*v.HeadDim, v.MaxSoftTokens, v.Dim), 8) || !core.ProductFits(n*p, p, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"), Msg: fmt.Sprintf("%d image patches are more than memsh simulates", n*p), Hint: units.HintTensor}})
	}
	padded := perImage*v.Pool*v.Pool < p
	h := v.tower(b, n, p, padded)
	defer b.Scope("embed_vision")()
	h = gemma4Norm(b, "embedding_pre_projection_norm", h, v.Dim, false)
	h = b.Linear("embedding_projection", core.RoleLinear, h, v.Dim, v.TextDim, false)
	// torch.cat of the per-image features (a copy), in the text's dtype.
	h = b.Ew("cat", "image_features", []core.Value{h}, b.Shape(h), b.Dtype(h), "the images' soft tokens concatenated")
	h = b.Cast(h, b.Dtype(x), "image features in the text embeddings' dtype")
	y, _ := joinImageTokens(b, x, h)
	return y
}

// tower is model.vision_tower over n images of p patches (padded: some
// are padding); it returns the soft tokens [n x perImage, hidden].
func (v *Gemma4VisionTower) tower(b *core.Builder, n, p int64, padded bool) core.Value {
	defer b.Scope("vision_tower")()
	d := b.AddOp("data", "pixel_values", nil)
	pix := b.Out(d, "pixel_values", []int64{n, p, v.patchIn()}, units.FP32, "image patches from the processor, padded (fp32)")
	pos := b.Out(d, "pixel_position_ids", []int64{n, p, 2}, units.INT64, "each patch's (x, y), -1 on padding (int64)")
	b.Val(pix).Grad, b.Val(pos).Grad = false, false
	b.P.Held = append(b.P.Held, pix, pos)
	pm := b.AddOp("all", "padding_positions", []core.Value{pos})
	pad := b.Out(pm, "padding_positions", []int64{n, p}, units.BOOL, "padding patches (positions == -1), saved by torch.where and masked_fill")
	cl := b.AddOp("clamp", "clamped_positions", []core.Value{pos})
	clamped := b.Out(cl, "clamped_positions", []int64{n, p, 2}, units.INT64, "positions clamped at 0, saved by the table lookups")
	b.Val(pad).Grad, b.Val(clamped).Grad = false, false
	b.Op(pm).NoGradB, b.Op(cl).NoGradB = true, true

	h, last := v.patchEmbed(b, pix, clamped, pad, n, p)
	// rotary_emb: cos and sin of the (x, y) angles in the hidden states'
	// dtype, made once; every layer's rope saves them, and they live until
	// the first layer's backward, which runs just before the embedder's.
	r := b.AddOp("rotary", "rotary_emb", []core.Value{pos})
	cos := b.Out(r, "rotary_cos", []int64{n, p, v.HeadDim}, b.Dtype(h), "2-D rotary cos table, saved by every layer's rope")
	sin := b.Out(r, "rotary_sin", []int64{n, p, v.HeadDim}, b.Dtype(h), "2-D rotary sin table, saved by every layer's rope")
	b.Val(cos).Grad, b.Val(sin).Grad = false, false
	b.Op(r).NoGradB = true
	b.Save(last, cos, sin)
	var mask core.Value = core.NoValue
	if padded { // create_bidirectional_mask: bool for SDPA, additive in the dtype for eager
		mk := b.AddOp("mask", "attention_mask", []core.Value{pad})
		dt := units.BOOL
		if v.Impl == "eager" {
			dt = b.Dtype(h)
		}
		mask = b.Out(mk, "attention_mask", []int64{n, 1, p, p}, dt, "the padding mask over each image's patches, alive through the encoder")
		b.Val(mask).Grad = false
		b.Op(mk).NoGradB = true
	}
	func() {
		defer b.Scope("encoder")()
		layer := &gemma4VisionLayer{t: v, masked: padded}
		h = b.LowerChild(&core.Repeat{Name: "layers", Layer: layer, N: v.Depth}, h)
	}()
	b.KeepAlive("attention_mask", mask)
	return v.pool(b, h, clamped, pad, n, p)
}

// patchEmbed is Gemma4VisionPatchEmbedder; it returns the embeddings and
// the op whose backward runs last in the tower's layers' wake.
func (v *Gemma4VisionTower) patchEmbed(b *core.Builder, pix, clamped, pad core.Value, n, p int64) (core.Value, int32) {
	defer b.Scope("patch_embedder")()
	x := b.Ew("scale", "pixels_scaled", []core.Value{pix}, b.Shape(pix), units.FP32, "2 * (pixel_values - 0.5), a new fp32 tensor")
	x = b.Cast(x, b.Prec.Params, "pixel patches in input_proj's dtype")
	h := b.Linear("input_proj", core.RoleLinear, x, v.patchIn(), v.Dim, false)
	w := b.Param("position_embedding_table", []int64{2, v.Positions, v.Dim}, core.RoleEmbed)
	var rows [2]core.Value
	for j, axis := range []string{"x", "y"} {
		e := b.AddOp("embedding", axis+"_emb", []core.Value{clamped}, w)
		rows[j] = b.Out(e, axis+"_emb", []int64{n, p, v.Dim}, b.Prec.Params, "the table's "+axis+" rows of each patch")
		b.Save(e, clamped)
		b.Op(e).NoGradB = true
	}
	sum := b.Add("position_embeddings", rows[0], rows[1])
	wh := b.AddOp("where", "padding_zeroed", []core.Value{pad, sum})
	pe := b.Out(wh, "position_embeddings", b.Shape(sum), b.Dtype(sum), "position embeddings, zero on padding")
	b.Save(wh, pad)
	b.Op(wh).Flops = float64(core.Numel(b.Shape(sum)))
	y := b.Add("embeddings", h, pe)
	return y, b.Val(y).Producer
}

// pool is Gemma4VisionPooler and the padding tokens' removal: the soft
// tokens [n x perImage, hidden] in the embeddings' dtype.
func (v *Gemma4VisionTower) pool(b *core.Builder, h, clamped, pad core.Value, n, p int64) core.Value {
	dt := b.Dtype(h)
	defer b.Scope("pooler")()
	mf := b.AddOp("masked_fill", "padding_zeroed", []core.Value{h, pad})
	hm := b.Out(mf, "hidden_states", b.Shape(h), dt, "the last layer's output, zero on padding")
	b.Save(mf, pad)
	l := v.MaxSoftTokens
	oh := b.AddOp("one_hot", "pool_weights", []core.Value{clamped})
	wts := b.Out(oh, "pool_weights", []int64{n, l, p}, units.FP32, "one-hot pooling weights / k² (fp32), saved by the bmm")
	b.Val(wts).Grad = false
	b.Op(oh).NoGradB = true
	b.Op(oh).WorkF = units.INT64.Bytes(n*p*l) + units.FP32.Bytes(n*p*l) // F.one_hot's int64 result and its .float()
	hf := b.Cast(hm, units.FP32, "hidden states in fp32 for the pooling bmm")
	mm := b.AddOp("matmul", "avg_pool", []core.Value{wts, hf})
	out := b.Out(mm, "pooled", []int64{n, l, v.Dim}, units.FP32, "patches averaged into soft tokens (fp32)")
	b.Save(mm, wts)
	b.Op(mm).Flops = 2 * float64(n*l) * float64(p) * float64(v.Dim)
	out = b.Cast(out, dt, "pooled tokens in the hidden states' dtype")
	pk := b.AddOp("any", "pooler_mask", []core.Value{wts})
	keep := b.Out(pk, "pooler_mask", []int64{n, l}, units.BOOL, "soft tokens with patches, saved by the boolean index")
	b.Val(keep).Grad = false
	b.Op(pk).NoGradB = true
	out = b.Cast(out, units.FP32, "pooled tokens in fp32 for the sqrt(hidden) scaling")
	out = b.Ew("mul", "scaled", []core.Value{out}, b.Shape(out), units.FP32, "soft tokens times sqrt(hidden_size), fp32")
	tokens := n * v.ImageTokens(b.Images.Height, b.Images.Width)
	ix := b.AddOp("index", "strip_padding", []core.Value{out, keep})
	sel := b.Out(ix, "soft_tokens", []int64{tokens, v.Dim}, units.FP32, "the soft tokens without padding (fp32)")
	b.Save(ix, keep)
	if v.Standardize {
		sel = b.Ew("sub", "std_bias", []core.Value{sel}, b.Shape(sel), units.FP32, "soft tokens less std_bias (fp32)")
		ins := []core.Value{sel}
		if b.Prec.Params != units.FP32 { // std_scale.float(): a new fp32 copy of the buffer
			c := b.AddOp("cast", "std_scale_fp32", nil)
			sc := b.Out(c, "std_scale.fp32", []int64{v.Dim}, units.FP32, "fp32 copy of the std_scale buffer, saved by the product")
			b.Val(sc).Grad = false
			ins = append(ins, sc)
		}
		st := b.AddOp("mul", "std_scale", ins)
		sel = b.Out(st, "standardized", b.Shape(sel), units.FP32, "standardized soft tokens (fp32)")
		if len(ins) > 1 {
			b.Save(st, ins[1])
		}
		b.Op(st).Flops = float64(core.Numel(b.Shape(sel)))
	}
	return b.Cast(sel, dt, "soft tokens in the embeddings' dtype")
}

// gemma4VisionLayer is Gemma4VisionEncoderLayer; masked: the images have
// padding, so the attention gets a mask.
type gemma4VisionLayer struct {
	t      *Gemma4VisionTower
	masked bool
}

func (k *gemma4VisionLayer) Kind() string               { return "gemma4_vision_layer" }
func (k *gemma4VisionLayer) Label() string              { return "" }
func (k *gemma4VisionLayer) Children() []core.Layer     { return nil }
func (k *gemma4VisionLayer) Params() int64              { return k.t.layerParams() }
func (k *gemma4VisionLayer) Summary() string            { return fmt.Sprintf("%d, mlp %d", k.t.Dim, k.t.Inter) }
func (k *gemma4VisionLayer) Validate(path string) error { return nil }

func (k *gemma4VisionLayer) Lower(b *core.Builder, x core.Value) core.Value {
	t := k.t
	d := t.Dim
	h := gemma4Norm(b, "input_layernorm", x, d, true)
	h = k.attention(b, h)
	h = gemma4Norm(b, "post_attention_layernorm", h, d, true)
	x = b.Add("residual", x, h)
	h = gemma4Norm(b, "pre_feedforward_layernorm", x, d, true)
	func() {
		defer b.Scope("mlp")()
		g := t.clipLinear(b, "gate_proj", core.RoleGate, h, d, t.Inter)
		g = Activation(b, t.Act, g)
		u := t.clipLinear(b, "up_proj", core.RoleUp, h, d, t.Inter)
		h = t.clipLinear(b, "down_proj", core.RoleDown, b.Mul("act_up", g, u), t.Inter, d)
	}()
	h = gemma4Norm(b, "post_feedforward_layernorm", h, d, true)
	return b.Add("residual", x, h)
}

// attention is Gemma4VisionAttention over x [images, patches, hidden].
func (k *gemma4VisionLayer) attention(b *core.Builder, x core.Value) core.Value {
	t := k.t
	defer b.Scope("self_attn")()
	s := b.Shape(x)
	hq, hk, hd := t.Heads, t.KVHeads, t.HeadDim
	q := t.clipLinear(b, "q_proj", core.RoleQ, x, t.Dim, hq*hd)
	q = gemma4HeadNorm(b, "q_norm", q, s, hq, hd, true)
	q = rope(b, "q", q, core.WithLast(s, hq*hd))
	kk := t.clipLinear(b, "k_proj", core.RoleK, x, t.Dim, hk*hd)
	kk = gemma4HeadNorm(b, "k_norm", kk, s, hk, hd, true)
	kk = rope(b, "k", kk, core.WithLast(s, hk*hd))
	v := t.clipLinear(b, "v_proj", core.RoleV, x, t.Dim, hk*hd)
	v = gemma4HeadNorm(b, "v_norm", v, s, hk, hd, false)
	a := &Attention{Dim: t.Dim, Heads: hq, KVHeads: hk, HeadDim: hd, Impl: t.Impl, Rope: true, SoftmaxFP32: true,
		chunkMask: k.masked && t.Impl == "sdpa"}
	kl, vl := seqMajor, seqMajor
	if hk != hq { // repeat_kv: no enable_gqa for a bidirectional kernel
		kk = expandKV(b, "k", kk, core.WithLast(s, hq*hd), hk)
		v = expandKV(b, "v", v, core.WithLast(s, hq*hd), hk)
		kl, vl = headMajor, headMajor
		if hk == 1 {
			kl, vl = expandedHeads, expandedHeads
		}
	}
	if b.Prec.Autocast {
		q = b.Cast(q, b.Prec.Compute, "autocast copy of q for the attention kernel")
		kk, kl = castHeads(b, "k", kk, kl, core.WithLast(s, hq*hd))
		v, vl = castHeads(b, "v", v, vl, core.WithLast(s, hq*hd))
	}
	var o core.Value
	if t.Impl == "eager" {
		o = a.eager(b, q, kk, v, s, kl, vl)
	} else {
		o = a.Fused(b, q, kk, v, s)
	}
	return t.clipLinear(b, "o_proj", core.RoleO, o, hq*hd, t.Dim)
}

// clipLinear is Gemma4ClippableLinear: its Linear under .linear, with
// use_clipped_linears a clamp of its input and of its output against
// tensor bounds (buffers), each clamp saving its input.
func (v *Gemma4VisionTower) clipLinear(b *core.Builder, name string, role core.Role, x core.Value, in, out int64) core.Value {
	defer b.Scope(name)()
	if v.Clip {
		x = clamp(b, "clamp_input", x)
	}
	y := b.Linear("linear", role, x, in, out, false)
	if v.Clip {
		y = clamp(b, "clamp_output", y)
	}
	return y
}

// clamp is torch.clamp(x, min, max) with tensor bounds: it saves x.
func clamp(b *core.Builder, name string, x core.Value) core.Value {
	i := b.AddOp("clamp", name, []core.Value{x})
	y := b.Out(i, name, b.Shape(x), b.Dtype(x), "clamped between the clip buffers")
	if b.Grad(x) {
		b.Save(i, x)
	}
	b.Op(i).Flops = 2 * float64(core.Numel(b.Shape(x)))
	b.Op(i).Bytes += float64(b.Val(x).Bytes)
	return y
}
