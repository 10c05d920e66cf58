package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// blocks are the tower's blocks for images of gh x gw patches: the full
// blocks attend within their image, the others within their windows
// (Attention.Window is the keys each patch sees, for the FLOPs; what the
// kernels save does not depend on it).
func (v *VisionTower) blocks(gh, gw int64) *core.Repeat {
	full := map[int64]bool{}
	for _, i := range v.FullBlocks {
		full[i] = true
	}
	perImage := gh * gw
	win := perImage
	if v.Window > 0 {
		win = min(perImage, v.windowKeys(gh, gw))
	}
	block := func(window int64) core.Layer {
		a := &Attention{Name: "attn", Dim: v.Dim, Heads: v.Heads, QKVBias: true, OutBias: true, Impl: v.Impl,
			Rope: true, FusedQKV: true, SoftmaxFP32: true, Window: window, ChunkCat: true, OutName: "proj"}
		return preNormLayer(v.norm("norm1"), a, v.norm("norm2"), v.mlp())
	}
	fullBlock, winBlock := block(perImage), block(win)
	bs := make([]core.Layer, v.Depth)
	for i := range bs {
		bs[i] = winBlock
		if full[int64(i)] || v.Window == 0 {
			bs[i] = fullBlock
		}
	}
	return &core.Repeat{Name: "blocks", Blocks: bs}
}

// Lower runs the tower as Qwen2_5_VisionTransformerPretrainedModel.forward
// does on the plan's images and videos (vision_video.go), then joins
// their tokens to the text embeddings x, the images' first.
func (v *VisionTower) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != v.TextDim {
		panic(core.ShapeMismatch(b, "vision_tower", v.TextDim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(v))()
	ins := towerInputs(b, v.Temporal, false, v.ImageTokens)
	if len(ins) == 0 {
		v.registerIdle(b)
		return x
	}
	var runs core.SharedCalls // the same weights for the images and the videos
	hs := make([]core.Value, len(ins))
	for i, in := range ins {
		runs.Begin(b)
		hs[i] = v.run(b, in)
		runs.End(b)
	}
	// The image (video) tokens replace the placeholders: masked_scatter.
	for i, in := range ins {
		x, _ = joinTokens(b, x, hs[i], in.kind)
	}
	return x
}

// run is one call of the tower on in: its tokens in the order of the
// frames.
func (v *VisionTower) run(b *core.Builder, in visualInput) core.Value {
	gh, gw := v.grid(in.h), v.grid(in.w)
	perImage := gh * gw
	// The processor's pixel patches, fp32, on the device for the step.
	patches, pix := imagePatches(b, in, perImage, v.patchIn(), v.mergedDim(), units.FP32)
	h := b.Linear("patch_embed.proj", core.RoleConv, b.Cast(pix, b.Prec.Params, "pixel patches in the tower's dtype"), v.patchIn(), v.Dim, false)
	// rot_pos_emb: cos and sin of the 2-D rotary angles, fp32.
	cos, sin := rotaryTables(b, "rot_pos_emb", patches, v.Dim/v.Heads)
	// The ropes' tables live until the first block's backward, which runs
	// just before the backward of the op before the blocks: saved with it.
	first := b.Val(h).Producer
	if !v.Qwen2VL {
		// hidden_states[window_index]: the patches in window order.
		first, h = indexCopy(b, "window_index", h, patches/(v.Merge*v.Merge))
	}
	blocks := int32(len(b.P.Ops))
	h = b.LowerChild(v.blocks(gh, gw), h)
	saveRopeTables(b, first, blocks, cos, sin)
	// merger: ln_q, then merge x merge patches side by side (a view).
	done := b.Scope("merger")
	if v.Qwen2VL {
		h = b.LayerNorm("ln_q", h, v.Dim, true)
	} else {
		h = b.RmsNorm("ln_q", h, v.Dim)
	}
	b.Val(h).Shape = core.WithLast([]int64{patches / (v.Merge * v.Merge), 1}, v.mergedDim())
	h = b.Linear("mlp.0", core.RoleLinear, h, v.mergedDim(), v.mergedDim(), true)
	h = Activation(b, "gelu", h)
	h = b.Linear("mlp.2", core.RoleLinear, h, v.mergedDim(), v.TextDim, true)
	done()
	if !v.Qwen2VL {
		// hidden_states[reverse_indices]: the tokens back in image order.
		_, h = indexCopy(b, "reverse_indices", h, patches/(v.Merge*v.Merge))
	}
	return h
}

// registerIdle registers the tower's weights when no image runs.
func (v *VisionTower) registerIdle(b *core.Builder) {
	registerTensors(b, 1+v.Depth*12+7, v.tensors)
}

// tensors lists the parameters, as the lowering registers them.
func (v *VisionTower) tensors(fn tensorFn) {
	d, m := v.Dim, v.mergedDim()
	norm := func(name string) {
		fn(name+".weight", []int64{d}, core.RoleNorm)
		if v.Qwen2VL {
			fn(name+".bias", []int64{d}, core.RoleNorm)
		}
	}
	linear := func(name string, out, in int64, role core.Role) {
		fn(name+".weight", []int64{out, in}, role)
		fn(name+".bias", []int64{out}, role)
	}
	fn("patch_embed.proj.weight", []int64{d, v.patchIn()}, core.RoleConv)
	for i := int64(0); i < v.Depth; i++ {
		p := "blocks." + core.Itoa(i) + "."
		norm(p + "norm1")
		linear(p+"attn.qkv", 3*d, d, core.RoleQKV)
		linear(p+"attn.proj", d, d, core.RoleO)
		norm(p + "norm2")
		if v.Qwen2VL {
			linear(p+"mlp.fc1", v.Inter, d, core.RoleUp)
			linear(p+"mlp.fc2", d, v.Inter, core.RoleDown)
			continue
		}
		linear(p+"mlp.gate_proj", v.Inter, d, core.RoleGate)
		linear(p+"mlp.up_proj", v.Inter, d, core.RoleUp)
		linear(p+"mlp.down_proj", d, v.Inter, core.RoleDown)
	}
	norm("merger.ln_q")
	linear("merger.mlp.0", m, m, core.RoleLinear)
	linear("merger.mlp.2", v.TextDim, m, core.RoleLinear)
}
