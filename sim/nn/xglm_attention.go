package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// XGLMAttention's eager attention (Attention.XGLMEager;
// models/xglm/modeling_xglm.py at transformers 5.25.0, its only
// attention: XGLMPreTrainedModel supports neither SDPA nor flash):
//
//	query_states = self.q_proj(hidden_states) * self.scaling     # a new tensor, nothing saved
//	attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
//	attn_weights = attn_weights.view(bsz, heads, tgt, src) + attention_mask
//	attn_weights = torch.max(attn_weights, torch.full((), finfo.min))   # saves both
//	softmax(attn_weights, -1)                                    # fp16: dtype=fp32, cast back
//
// Measured with tools/oracle/hf_block_saved.py (TestXGLMSavesAsTransformers):
// the masked scores, [batch, heads, seq, seq], and a 0-dim fp32 tensor
// (torch.full's default dtype, in a bf16 model too) a layer beside the
// softmax's output.

// xglmScaleQ is q_proj's output times the scaling: a new tensor of q's
// shape, which the product's backward does not need (a Python float).
func xglmScaleQ(b *core.Builder, q core.Value) core.Value {
	i := b.AddOp("mul", "q_scaling", []core.Value{q})
	y := b.Out(i, "q_scaled", b.Shape(q), b.Dtype(q), "q_proj's output times head_dim^-0.5 (XGLM scales q, not the scores)")
	b.Op(i).Flops = float64(core.Numel(b.Shape(q)))
	b.Op(i).Bytes += float64(b.Val(q).Bytes)
	return y
}

// xglmFloor is torch.max(scores, torch.full((), finfo.min)): maximum's
// backward masks the gradient by which operand won, so it saves both, the
// masked scores and the 0-dim floor.
func xglmFloor(b *core.Builder, scores core.Value, shape []int64) core.Value {
	dt := b.Dtype(scores)
	i := b.AddOp("maximum", "floor", []core.Value{scores})
	y := b.Out(i, "floored", shape, dt, "masked scores floored at finfo.min")
	floor := b.Out(i, "floor", nil, units.FP32, "torch.full((), finfo.min), the 0-dim floor maximum saves (fp32, torch's default dtype, whatever the scores')")
	b.Val(floor).Grad = false
	b.Save(i, scores, floor)
	b.Op(i).Flops = float64(core.Numel(shape))
	b.Op(i).Bytes += float64(b.Val(scores).Bytes)
	return y
}
