package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MiMo-V2-Flash's attention (MiMoV2FlashAttention and its
// eager_attention_forward, models/mimo_v2_flash/modeling_mimo_v2_flash.py
// at transformers 5.25.0):
//
//	v = v_proj(x).view(..., v_head_dim).transpose(1, 2) * v_scale   # VHeadDim, VScale
//	scores = q @ repeat_kv(k)^T * scaling (+ mask)                  # q and k head_dim wide
//	[cat(scores, sinks)] - max(dim=-1, keepdim=True).values         # MaxShift: every layer
//	softmax(dim=-1, dtype=scores.dtype), [drop the sink column], @ repeat_kv(v)
//
// v's heads are v_head_dim wide and so are the context and o_proj's
// input (num_attention_heads x v_head_dim); the product by the
// attention_value_scale constant saves nothing (a Python scalar) but
// makes v anew, with v_proj's strides. The row max is subtracted in the
// layers without sinks too, with the scores' own dtype kept through the
// softmax (no fp32 upcast).

// Vd is v's head width: VHeadDim, else the head's.
func (a *Attention) Vd() int64 {
	if a.VHeadDim > 0 {
		return a.VHeadDim
	}
	return a.Hd()
}

// checkValueHead: VHeadDim and MaxShift are lowered on the eager path
// alone (MiMo-V2-Flash has no SDPA path and only FlashAttention 4's
// flash one), with separate q, k and v projections and none of the
// other variants' gates or norms around v.
func (a *Attention) checkValueHead(path string) error {
	if a.VHeadDim < 0 {
		return units.Errorf(path, "v_head_dim must be positive, or 0 for head_dim (got %d)", a.VHeadDim)
	}
	if (a.VHeadDim > 0 && a.VHeadDim != a.Hd() || a.MaxShift) && a.Impl != "eager" {
		return units.Errorf(path, "a value head width other than head_dim and the row-max shift are modelled under eager attention only (got %s)", a.Impl)
	}
	if a.VHeadDim > 0 && a.VHeadDim != a.Hd() && (a.FusedQKV || a.OutputGate || a.GateProj || a.GateSoftplus || a.GateSigmoid || a.SinkScale || a.AdapterRank > 0 || a.ChunkCat) {
		return units.Errorf(path, "a value head width other than head_dim is modelled with separate q, k and v projections and no output gate (MiMo-V2-Flash's attention)")
	}
	return nil
}

// valueScale is v_proj's output times attention_value_scale, out of
// place: the new v keeps the projection's strides and the product saves
// nothing (its other operand a Python float).
func valueScale(b *core.Builder, v core.Value) core.Value {
	i := b.AddOp("mul", "v_scale", []core.Value{v})
	b.Op(i).Bytes += float64(b.Val(v).Bytes)
	b.Op(i).Flops = float64(core.Numel(b.Shape(v)))
	return b.Out(i, "v_scaled", b.Shape(v), b.Dtype(v), "v times attention_value_scale")
}

// maxShift is x - x.max(dim=-1, keepdim=True).values: max(dim=-1) keeps
// its int64 indices for its backward; the subtraction saves nothing
// (GptOss's and MiMo-V2-Flash's eager_attention_forward at 5.25.0).
func maxShift(b *core.Builder, x core.Value, shape []int64, why string) core.Value {
	dt := b.Dtype(x)
	rows := core.WithLast(shape, 1)
	mx := b.AddOp("max", "row_max", []core.Value{x})
	rowMax := b.Out(mx, "row_max", rows, dt, "each row's max logit")
	idx := b.Out(mx, "row_max_indices", rows, units.INT64, "the row max's indices (max(dim=-1) keeps them for its backward)")
	b.Save(mx, idx)
	b.Op(mx).Bytes += float64(b.Val(x).Bytes)
	sub := b.AddOp("sub", "combined_logits_shifted", []core.Value{x, rowMax})
	y := b.Out(sub, "combined_logits_shifted", shape, dt, why)
	b.Op(sub).Bytes += 2 * float64(b.Val(x).Bytes)
	return y
}
