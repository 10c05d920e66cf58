package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs Llama4VisionModel.forward and the projector on the plan's
// images and joins their tokens to the text embeddings x.
func (v *Llama4Vision) Lower(b *core.Builder, x core.Value) core.Value {
	if idleWithoutImages(b, "llama4_vision", v.TextDim, x, v.registerIdle) {
		return x
	}
	im := b.Images
	d, p := v.Dim, v.patches()
	perImage := Llama4Tiles(im.Height, im.Width, v.Image, v.MaxTiles)
	tokens := im.Count * perImage * v.TileTokens() // a sample's
	if tokens > b.Seq {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"),
			Msg: fmt.Sprintf("%s of %dx%d pixels: %s an image (Llama4ImageProcessor), %d image tokens a tile, %d a sample, more than seq=%d",
				units.Count(im.Count, "image"), im.Height, im.Width, units.Count(perImage, "tile"), v.TileTokens(), tokens, b.Seq),
			Hint: "seq counts the image tokens with the text: raise seq, or use fewer or smaller images (an image of one tile's size or less is one tile)"}})
	}
	tiles := b.Batch * im.Count * perImage
	if !core.ProductFits(tiles, p+1, max(v.Inter, v.patchIn(), v.ProjIn), 8) || !core.ProductFits(tiles, v.Image, v.Image, v.Channels, 8) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_model"), Msg: fmt.Sprintf("%d image tiles are more than memsh simulates", tiles), Hint: units.HintTensor}})
	}
	b.ReserveParams(v.Layers*16 + 11)
	done := b.Scope("vision_model")
	pix := b.AddOp("data", "pixel_values", nil)
	px := b.Out(pix, "pixel_values", []int64{tiles, v.Channels, v.Image, v.Image}, b.Prec.Params, "image tiles from the processor, in the model's dtype")
	b.Val(px).Grad = false
	b.P.Held = append(b.P.Held, px)
	// patch_embedding: nn.Unfold, then the linear's matmul folds the
	// permuted patches into a contiguous copy, which it saves.
	u := b.Ew("unfold", "unfolded_patches", []core.Value{px}, []int64{tiles * p, v.patchIn()}, b.Dtype(px), "the tiles' patches unfolded and made contiguous (the patch linear's input)")
	h := b.Linear("patch_embedding.linear", core.RoleLinear, u, v.patchIn(), d, false)
	b.Val(h).Shape = []int64{tiles, p, d}
	cls := b.Param("class_embedding", []int64{d}, core.RoleEmbed)
	c := b.AddOp("cat", "class_token", []core.Value{h}, cls)
	h = b.Out(c, "with_class_token", []int64{tiles, p + 1, d}, b.Dtype(h), "the tiles' patches and the class token")
	pos := b.Param("positional_embedding_vlm", []int64{p + 1, d}, core.RoleEmbed)
	a := b.AddOp("add", "add_positional_embedding", []core.Value{h}, pos)
	h = b.Out(a, "with_positions", []int64{tiles, p + 1, d}, b.Dtype(h), "tile tokens with positional_embedding_vlm added")
	b.Op(a).Flops = float64(core.Numel(b.Shape(h)))
	h = b.LayerNorm("layernorm_pre", h, d, true)
	v.rotaryBuffer(b)
	// Llama4VisionEncoderLayer: x + self_attn(input_layernorm(x)), then
	// + mlp(post_attention_layernorm(.)), its mlp fc1, GELU, fc2.
	attn := &Attention{Name: "self_attn", Dim: d, Heads: v.Heads, QKVBias: true, OutBias: true, Impl: v.Impl, Rope: true, RopeComplex: true}
	layer := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{&Norm{Name: "input_layernorm", Dim: d, Bias: true}, attn}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{&Norm{Name: "post_attention_layernorm", Dim: d, Bias: true},
			&MLP{Name: "mlp", Dim: d, Hidden: v.Inter, Act: "gelu", Bias: true}}}},
	}}
	h = b.LowerChild(&core.Repeat{Name: "model.layers", Layer: layer, N: v.Layers}, h)
	h = b.LayerNorm("layernorm_post", h, d, true)
	// vision_adapter: the class token sliced off (a view), pixel_shuffle's
	// two contiguous copies (the first transient), the MLP.
	wide, n := d*v.Shuffle*v.Shuffle, tiles*v.TileTokens()
	ad := b.Scope("vision_adapter")
	sh := b.Ew("pixel_shuffle", "pixel_shuffle", []core.Value{h}, []int64{n, wide}, b.Dtype(h), "the patches merged by pixel_shuffle (its second contiguous copy)")
	b.Op(b.Val(sh).Producer).WorkF = b.Val(sh).Bytes // the first permuted copy
	b.Op(b.Val(sh).Producer).WorkB = b.Val(sh).Bytes
	h = b.Linear("mlp.fc1", core.RoleLinear, sh, v.Inter, v.ProjIn, false)
	h = Activation(b, "gelu", h)
	h = b.Linear("mlp.fc2", core.RoleLinear, h, v.ProjOut, v.ProjOut, false)
	h = Activation(b, "gelu", h)
	ad()
	done()
	h = b.Linear("multi_modal_projector.linear_1", core.RoleLinear, h, v.OutputDim, v.TextDim, false)
	return joinImageFeatures(b, x, h)
}
