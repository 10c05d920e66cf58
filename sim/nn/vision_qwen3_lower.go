package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs the tower as Qwen3VLVisionModel.forward does on the plan's
// images and videos (vision_video.go), joins their tokens to the text
// embeddings x, the images' first, and leaves the deepstack features in
// b.Deepstack for the decoder layers (DeepstackAdd).
func (v *Qwen3VisionTower) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != v.TextDim {
		panic(core.ShapeMismatch(b, "vision_tower", v.TextDim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(v))()
	ins := towerInputs(b, v.Temporal, true, v.ImageTokens)
	if len(ins) == 0 {
		v.registerIdle(b)
		return x
	}
	var runs core.SharedCalls // the same weights for the images and the videos
	hs, feats := make([]core.Value, len(ins)), make([][]core.Value, len(ins))
	for i, in := range ins {
		runs.Begin(b)
		hs[i], feats[i] = v.run(b, in)
		runs.End(b)
	}
	// The image (video) tokens replace the placeholders: masked_scatter.
	masks := make([]core.Value, len(ins))
	for i, in := range ins {
		x, masks[i] = joinTokens(b, x, hs[i], in.kind)
	}
	b.Deepstack = nil
	if len(v.Deepstack) > 0 {
		b.Deepstack = deepstackStates(b, feats, masks)
	}
	return x
}

// run is one call of the tower on in: its tokens and its deepstack
// features.
func (v *Qwen3VisionTower) run(b *core.Builder, in visualInput) (core.Value, []core.Value) {
	gh, gw := v.grid(in.h), v.grid(in.w)
	perImage := gh * gw
	// The processor's pixel patches, fp32, on the device for the step.
	patches, pix := imagePatches(b, in, perImage, v.patchIn(), 4*v.mergedDim(), units.FP32)
	h := b.Linear("patch_embed.proj", core.RoleConv, b.Cast(pix, b.Prec.Params, "pixel patches in the tower's dtype"), v.patchIn(), v.Dim, true)
	h, interp := v.posEmbed(b, h, patches)
	// rotary_pos_emb: cos and sin of the 2-D rotary angles, fp32.
	cos, sin := rotaryTables(b, "rotary_pos_emb", patches, v.Dim/v.Heads)
	b.Deepstack = &core.DeepstackStates{}
	blocks := int32(len(b.P.Ops))
	h = b.LowerChild(v.blocks(perImage), h)
	// The ropes' tables live until the first block's backward, which runs
	// just before the position embedding's: saved with it.
	saveRopeTables(b, interp, blocks, cos, sin)
	feats := b.Deepstack.Feats
	for j, f := range feats {
		feats[j] = v.merger(b, "deepstack_merger_list."+core.Itoa(int64(j)), f, patches, true)
	}
	return v.merger(b, "merger", h, patches, false), feats
}

// deepstackStates are the deepstack features of the tower's runs for the
// text model, at the positions of masks (each run's placeholder mask).
// One run's are its features and mask. For images and videos
// Qwen3VLModel.forward joins them: visual_pos_masks = image_mask |
// video_mask, the image and video rows among them (image_mask_joint and
// video_mask_joint, bool, one a visual token), and per feature a new
// tensor of every visual row, zeros with the image rows then the video
// rows written in (index_put_, whose backward keeps its mask). The runs'
// own features stay referenced until the forward returns.
func deepstackStates(b *core.Builder, feats [][]core.Value, masks []core.Value) *core.DeepstackStates {
	if len(feats) == 1 {
		return &core.DeepstackStates{Feats: feats[0], Mask: masks[0]}
	}
	vis := b.Ew("or", "visual_pos_masks", masks, b.Shape(masks[0]), units.BOOL, "image_mask | video_mask: the visual positions")
	b.Val(vis).Grad = false
	b.Op(b.Val(vis).Producer).NoGradB = true
	var rows int64
	for _, f := range feats {
		rows += b.Shape(f[0])[0]
	}
	k := b.AddOp("index", "joint_masks", append([]core.Value{vis}, masks...))
	joint := make([]core.Value, len(masks))
	for i, m := range masks {
		joint[i] = b.Out(k, b.Val(m).Name+"_joint", []int64{rows}, units.BOOL, "the rows of one input among the visual rows")
		b.Val(joint[i]).Grad = false
	}
	b.Op(k).NoGradB = true
	out := &core.DeepstackStates{Mask: vis}
	for j := range feats[0] {
		ins := append([]core.Value{}, joint...)
		for _, f := range feats {
			ins = append(ins, f[j])
			out.Held = append(out.Held, f[j])
		}
		f := feats[0][j]
		p := b.AddOp("index_put", "deepstack_joint", ins)
		y := b.Out(p, "embed_joint", []int64{rows, b.Last(f)}, b.Dtype(f), "the deepstack feature of every visual row (image and video rows written into zeros)")
		b.Save(p, joint...)
		b.Op(p).Bytes = float64(2 * b.Val(y).Bytes)
		out.Feats = append(out.Feats, y)
	}
	return out
}

// posEmbed adds pos_embed resampled to the image grid:
// (pos_embed(indices) * weights[:, :, None]).sum(1), four bilinear taps a
// patch; the lookup keeps the int64 indices, the product the fp32 weights.
// It returns the op whose backward runs last in the tower.
func (v *Qwen3VisionTower) posEmbed(b *core.Builder, h core.Value, patches int64) (core.Value, int32) {
	const taps = 4
	g := b.AddOp("interp", "interpolation_indices", nil)
	idx := b.Out(g, "interp_indices", []int64{patches, taps}, units.INT64, "pos_embed's bilinear taps (int64), saved by the lookup")
	wts := b.Out(g, "interp_weights", []int64{patches, taps, 1}, units.FP32, "the taps' bilinear weights (fp32), saved by the product")
	b.Val(idx).Grad, b.Val(wts).Grad = false, false
	done := b.Scope("pos_embed")
	w := b.Param("weight", []int64{v.Positions, v.Dim}, core.RoleEmbed)
	e := b.AddOp("embedding", "", []core.Value{idx}, w)
	rows := b.Out(e, "out", []int64{patches, taps, v.Dim}, b.Prec.Params, "pos_embed rows of each patch's taps")
	b.Save(e, idx)
	b.Op(e).NoGradB = true
	done()
	p := b.Mul("pos_embeds_weighted", rows, wts)
	s := b.Ew("sum", "pos_embeds", []core.Value{p}, []int64{patches, v.Dim}, b.Dtype(p), "the taps summed")
	return b.Add("add_pos_embeds", h, b.Cast(s, b.Dtype(h), "pos_embeds in the hidden states' dtype")), b.Val(p).Producer
}

// blocks are the tower's blocks over images of perImage patches; those
// in Deepstack leave their output in b.Deepstack.
func (v *Qwen3VisionTower) blocks(perImage int64) *core.Repeat {
	plain := v.block(perImage, -1)
	bs := make([]core.Layer, v.Depth)
	for i := range bs {
		bs[i] = plain
	}
	for j, i := range v.Deepstack {
		bs[i] = v.block(perImage, j)
	}
	return &core.Repeat{Name: "blocks", Blocks: bs}
}

func (v *Qwen3VisionTower) block(perImage int64, tap int) *qwen3VisionBlock {
	return &qwen3VisionBlock{dim: v.Dim, inter: v.Inter, act: v.Act, tap: tap,
		attn: &Attention{Name: "attn", Dim: v.Dim, Heads: v.Heads, QKVBias: true, OutBias: true, Impl: v.Impl, OutName: "proj",
			Rope: true, FusedQKV: true, SoftmaxFP32: true, Window: perImage, ChunkCat: true}}
}

// merger is Qwen3VLVisionPatchMerger over the tower's hidden states h
// ([patches, hidden]): its LayerNorm before the merge x merge view, or
// after it (post: the deepstack mergers' use_postshuffle_norm), then
// linear_fc1, GELU, linear_fc2.
func (v *Qwen3VisionTower) merger(b *core.Builder, name string, h core.Value, patches int64, post bool) core.Value {
	defer b.Scope(name)()
	m, n := v.mergedDim(), patches/(v.Merge*v.Merge)
	if post {
		h = mergedLayerNorm(b, "norm", h, n, m)
	} else {
		h = b.LayerNorm("norm", h, v.Dim, true)
		b.Val(h).Shape = []int64{n, m}
	}
	h = b.Linear("linear_fc1", core.RoleLinear, h, m, m, true)
	h = Activation(b, "gelu", h)
	return b.Linear("linear_fc2", core.RoleLinear, h, m, v.TextDim, true)
}

// mergedLayerNorm is a LayerNorm with bias over x viewed as [rows, dim]
// (core.LayerNorm over a view that regroups the rows): it saves x, and
// mean and rstd per row of the view.
func mergedLayerNorm(b *core.Builder, name string, x core.Value, rows, dim int64) core.Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, core.RoleNorm)
	bias := b.Param("bias", []int64{dim}, core.RoleNorm)
	xin := x
	if b.Prec.Autocast {
		xin = b.Cast(x, units.FP32, "autocast fp32 copy of layer_norm input")
	}
	i := b.AddOp("layer_norm", "", []core.Value{xin}, w, bias)
	y := b.Out(i, "out", []int64{rows, dim}, b.Dtype(xin), "layer_norm output")
	statsDT := b.Dtype(xin)
	if b.Rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	mean := b.Out(i, "mean", []int64{rows, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.Out(i, "rstd", []int64{rows, 1}, statsDT, "layer_norm rstd (saved)")
	b.Val(mean).Grad, b.Val(rstd).Grad = false, false
	b.Save(i, xin, mean, rstd)
	b.Op(i).Flops = 8 * float64(rows*dim)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes)
	return y
}

// qwen3VisionBlock is Qwen3VLVisionBlock: x + attn(norm1(x)), then
// + mlp(norm2(.)); tap >= 0 leaves its output as deepstack feature tap.
type qwen3VisionBlock struct {
	dim, inter int64
	act        string
	tap        int
	attn       *Attention
}

func (k *qwen3VisionBlock) Kind() string           { return "vision_block" }
func (k *qwen3VisionBlock) Label() string          { return "" }
func (k *qwen3VisionBlock) Children() []core.Layer { return []core.Layer{k.attn} }
func (k *qwen3VisionBlock) Params() int64 {
	return 4*k.dim + k.attn.Params() + 2*k.dim*k.inter + k.inter + k.dim
}
func (k *qwen3VisionBlock) Summary() string            { return fmt.Sprintf("%d, mlp %d", k.dim, k.inter) }
func (k *qwen3VisionBlock) Validate(path string) error { return k.attn.Validate(path) }

func (k *qwen3VisionBlock) Lower(b *core.Builder, x core.Value) core.Value {
	h := b.LayerNorm("norm1", x, k.dim, true)
	x = b.Add("residual", x, b.LowerChild(k.attn, h))
	h = b.LayerNorm("norm2", x, k.dim, true)
	done := b.Scope("mlp")
	h = b.Linear("linear_fc1", core.RoleUp, h, k.dim, k.inter, true)
	h = Activation(b, k.act, h)
	h = b.Linear("linear_fc2", core.RoleDown, h, k.inter, k.dim, true)
	done()
	y := b.Add("residual", x, h)
	if k.tap >= 0 && b.Deepstack != nil {
		b.Deepstack.Feats = append(b.Deepstack.Feats, y)
	}
	return y
}

// DeepstackAdd is Qwen3VLTextModel._deepstack_process after decoder layer
// Index: hidden_states.clone(), the rows at the image positions plus
// deepstack feature Index written back (index, add, index_put_). Both
// indexings keep the placeholder mask masked_scatter already keeps; the
// gathered rows and their sum are transient. Without images (or past the
// features) it passes x through, as transformers skips it. It is no
// module: the text model's forward runs it between its layers' calls, so
// placed in a repeated block (after decoder layer Index) its op runs in
// the repeat's parent module (model.language_model), though it lowers
// inside the block (named under it).
type DeepstackAdd struct {
	Index int
}

func (d *DeepstackAdd) Kind() string           { return "deepstack_add" }
func (d *DeepstackAdd) Label() string          { return "" }
func (d *DeepstackAdd) DefaultName() string    { return "" }
func (d *DeepstackAdd) Children() []core.Layer { return nil }
func (d *DeepstackAdd) Params() int64          { return 0 }
func (d *DeepstackAdd) Summary() string        { return fmt.Sprintf("deepstack feature %d", d.Index) }
func (d *DeepstackAdd) Validate(path string) error {
	if d.Index < 0 {
		return units.Errorf(path, "deepstack feature index must be at least 0 (got %d)", d.Index)
	}
	return nil
}

func (d *DeepstackAdd) Lower(b *core.Builder, x core.Value) core.Value {
	ds := b.Deepstack
	if ds == nil || d.Index >= len(ds.Feats) {
		return x
	}
	f := ds.Feats[d.Index]
	if b.Last(f) != b.Last(x) {
		panic(core.ShapeMismatch(b, "deepstack_add", b.Last(x), b.Last(f)))
	}
	i := b.AddOp("deepstack", "deepstack_add", []core.Value{x, f, ds.Mask})
	if b.InBlock() { // after decoder layer Index, in its repeat: layers.<Index>'s parent, Qwen3VLTextModel.forward
		b.Op(i).Module = outerModule(b.Op(i).Module, 2)
	}
	y := b.Out(i, "hidden_states", b.Shape(x), b.Dtype(x), "the hidden states (a clone) with the deepstack features added at the image positions")
	b.Save(i, ds.Mask)
	rows := b.Dtype(x).Bytes(core.Numel(b.Shape(f)))
	b.Op(i).WorkF = 2 * rows // hidden_states[mask] and its sum with the features
	b.Op(i).WorkB = rows     // the gradient gathered at the image positions
	b.Op(i).Flops = float64(core.Numel(b.Shape(f)))
	b.Op(i).Bytes += float64(b.Val(x).Bytes + b.Val(f).Bytes)
	return y
}

// DeepstackEnd marks the end of Qwen3VLModel.forward: the list of
// deepstack features stays referenced until the language model returns.
// It is no module: a point in the forward of the module it is in.
type DeepstackEnd struct{}

func (d *DeepstackEnd) Kind() string               { return "deepstack_end" }
func (d *DeepstackEnd) Label() string              { return "" }
func (d *DeepstackEnd) DefaultName() string        { return "" }
func (d *DeepstackEnd) Children() []core.Layer     { return nil }
func (d *DeepstackEnd) Params() int64              { return 0 }
func (d *DeepstackEnd) Summary() string            { return "deepstack features released" }
func (d *DeepstackEnd) Validate(path string) error { return nil }
func (d *DeepstackEnd) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Deepstack != nil {
		b.KeepAlive("deepstack_visual_embeds", slices.Concat(b.Deepstack.Feats, b.Deepstack.Held)...)
	}
	return x
}

// outerModule is module path p without its last n components (the module
// n levels up; "" at the root).
func outerModule(p string, n int) string {
	for ; n > 0 && p != ""; n-- {
		i := strings.LastIndexByte(p, '.')
		p = p[:max(i, 0)]
	}
	return p
}
