package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lower runs the tower as Glm4vVisionModel.forward does on the plan's
// images or videos and joins their tokens to the text embeddings x.
func (v *Glm4vVisionTower) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != v.TextDim {
		panic(core.ShapeMismatch(b, "vision_tower", v.TextDim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(v))()
	ins := v.inputs(b)
	if len(ins) == 0 {
		v.registerIdle(b)
		return x
	}
	dataParallelImages(b, "GLM-4V's", "tp=1 and cp=1")
	in := ins[0]
	h := v.run(b, in)
	if b.Dtype(h) != b.Dtype(x) {
		h = b.Cast(h, b.Dtype(x), "the image tokens in the text embeddings' dtype (.to(inputs_embeds.dtype))")
	}
	x, _ = joinTokens(b, x, h, in.kind)
	return x
}

// run is one call of the tower on in (its frames resized): its tokens in
// the order of the frames.
func (v *Glm4vVisionTower) run(b *core.Builder, in visualInput) core.Value {
	perImage := (in.h / v.Patch) * (in.w / v.Patch)
	widest := max(v.patchIn(), 3*v.Dim, v.TextDim, v.mergedDim(), v.Inter)
	// The processor's pixel patches, fp32, on the device for the step.
	patches, pix := imagePatches(b, in, perImage, v.patchIn(), widest, units.FP32)
	h := b.Linear("patch_embed.proj", convRole(b), b.Cast(pix, b.Prec.Params, "pixel patches in the tower's dtype"), v.patchIn(), v.Dim, true)
	h = b.RmsNorm("post_conv_layernorm", h, v.Dim)
	// rotary_pos_emb: cos and sin of the 2-D rotary angles, fp32.
	cos, sin := rotaryTables(b, "rotary_pos_emb", patches, v.Dim/v.Heads)
	h, sample := v.positions(b, h, patches)
	blocks := int32(len(b.P.Ops))
	h = b.LowerChild(v.blocks(perImage), h)
	// The ropes' tables live until the first block's backward, which runs
	// just before the position embedding's: saved with it.
	saveRopeTables(b, sample, blocks, cos, sin)
	h = b.RmsNorm("post_layernorm", h, v.Dim)
	// downsample: merge x merge patches side by side (a view of the norm's
	// output, which the convolution saves), one output a group.
	tokens := patches / (v.Merge * v.Merge)
	b.Val(h).Shape = []int64{tokens, v.mergedDim()}
	h = b.Linear("downsample", core.RoleConv, h, v.mergedDim(), v.TextDim, true)
	done := b.Scope("merger")
	defer done()
	h = b.Linear("proj", core.RoleLinear, h, v.TextDim, v.TextDim, false)
	h = b.LayerNorm("post_projection_norm", h, v.TextDim, true)
	h = Activation(b, "gelu", h)
	return Ffn(b, h, v.TextDim, v.Inter, v.Act, false)
}

// positions adds embeddings.position_embedding resampled to each image's
// grid: F.grid_sample of the table, as fp32 [1, dim, side, side] (a copy
// when the weights are not fp32), at a [1, patches, 1, 2] fp32 grid of
// normalized coordinates; both are saved. The [patches, dim] fp32 result
// is cast to the weights' dtype and added. It returns the sum and the
// sampling op, whose backward runs last in the tower before the patch
// embedding's.
func (v *Glm4vVisionTower) positions(b *core.Builder, h core.Value, patches int64) (core.Value, int32) {
	g := b.AddOp("grid", "sampling_grid", nil)
	grid := b.Out(g, "grid", []int64{1, patches, 1, 2}, units.FP32, "grid_sample's normalized coordinates (fp32), saved by it")
	b.Val(grid).Grad = false
	done := b.Scope("embeddings.position_embedding")
	w := b.Param("weight", []int64{v.Positions, v.Dim}, core.RoleEmbed)
	done()
	var s int32
	saved := []core.Value{grid}
	if b.Prec.Params == units.FP32 {
		s = b.AddOp("grid_sample", "interpolated_embed", []core.Value{grid}, w)
	} else {
		c := b.AddOp("cast", "pos_embed_2d", nil, w)
		table := b.Out(c, "pos_embed_2d", []int64{v.Positions, v.Dim}, units.FP32, "the position table in fp32 (.to(torch.float32)), saved by grid_sample")
		s = b.AddOp("grid_sample", "interpolated_embed", []core.Value{table, grid})
		saved = append(saved, table)
	}
	pos := b.Out(s, "adapted_pos_embed", []int64{patches, v.Dim}, units.FP32, "the position table resampled to the patches (fp32)")
	b.Save(s, saved...)
	b.Op(s).Flops = float64(16 * 2 * patches * v.Dim) // bicubic: 16 taps a value
	pos = b.Cast(pos, b.Prec.Params, "adapted_pos_embed in the weights' dtype")
	return b.Add("add_pos_embed", h, pos), s
}

// blocks are the tower's blocks over images of perImage patches.
func (v *Glm4vVisionTower) blocks(perImage int64) *core.Repeat {
	a := &Attention{Name: "attn", Dim: v.Dim, Heads: v.Heads, QKVBias: v.AttnBias, Impl: v.Impl, OutName: "proj",
		Rope: true, FusedQKV: true, SoftmaxFP32: true, Window: perImage, ChunkCat: true}
	block := preNormLayer(&Norm{Name: "norm1", Dim: v.Dim, RMS: true}, a, &Norm{Name: "norm2", Dim: v.Dim, RMS: true},
		&MLP{Name: "mlp", Dim: v.Dim, Hidden: v.TextDim, Act: v.Act})
	return &core.Repeat{Name: "blocks", Layer: block, N: v.Depth}
}
