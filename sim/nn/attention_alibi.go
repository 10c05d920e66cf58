package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// alibiMaskedFill lowers MptAttention's scores past the scale
// (Attention.AlibiMaskedFill; models/mpt/modeling_mpt.py at transformers
// 5.25.0):
//
//	attention_scores = attention_scores + position_bias  # [heads, 1, seq] fp32
//	attention_scores = attention_scores.masked_fill(attention_mask, finfo.min)
//	attn_weights = softmax(attention_scores.float(), dim=-1).to(value_states.dtype)
//
// The bias is build_mpt_alibi_tensor's, fp32, made once a forward at
// max_seq_len and sliced: the sum is fp32 whatever the scores' dtype (the
// add saves nothing). masked_fill saves its bool mask, the one
// create_causal_mask(...).to(torch.bool) the model hands every layer
// ([batch, 1, seq, seq]: 2,048 bytes at batch 2 x 32 on the CPU with
// transformers 5.25.0, one storage for all layers); the .float() is then
// the tensor itself.
func (a *Attention) alibiMaskedFill(b *core.Builder, scaled core.Value, s, scoreShape []int64) core.Value {
	dt := core.Promote(b.Dtype(scaled), units.FP32)
	i := b.AddOp("add", "alibi", []core.Value{scaled, a.alibiTable(b)})
	b.Op(i).Bytes += float64(b.Val(scaled).Bytes)
	b.Op(i).Flops = float64(core.Numel(scoreShape))
	biased := b.Out(i, "alibi_scores", scoreShape, dt, "scores plus MPT's fp32 ALiBi bias (promoted to fp32)")
	mask := a.forwardMask(b, s, units.BOOL, false)
	m := b.AddOp("masked_fill", "causal_mask", []core.Value{biased, mask})
	b.Op(m).Bytes += float64(b.Val(biased).Bytes + b.Val(mask).Bytes)
	y := b.Out(m, "masked", scoreShape, dt, "masked attention scores (masked_fill saves the bool mask)")
	b.Save(m, mask)
	return y
}

// alibiTable is build_mpt_alibi_tensor's bias, [heads, 1, AlibiLen] fp32
// (AlibiLen: the config's max_seq_len), which MptModel.forward makes once
// a forward and hands every block: not saved, but alive through the
// blocks, and held by each checkpointed block until its backward
// (hf_block_saved.py's held: a (4, 1, 128) fp32 tensor of 2,048 bytes
// for mpt-tiny.json).
func (a *Attention) alibiTable(b *core.Builder) core.Value {
	key := fmt.Sprintf("mpt_alibi.%d.%d", a.Heads, a.AlibiLen)
	if v, ok := b.SharedValue(key); ok {
		return v
	}
	i := b.AddOp("alibi", "alibi", nil)
	y := b.Out(i, "alibi", []int64{a.Heads, 1, max(a.AlibiLen, 1)}, units.FP32, "MPT's ALiBi bias, made once a forward at max_seq_len")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Share(key, y)
	b.OutsideRegions(i)
	return y
}
