package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Flint's attention sinks (Attention.SinksNoShift, KeepSinksFP32):
// FlintAttention's eager_attention_forward (models/flint/modular_flint.py
// at transformers 5.25.0) multiplies q and k cast to fp32 (QKFP32), adds
// the mask, concatenates each head's fp32 sink to the fp32 scores and
// runs softmax over them as they are, with no row max taken (gpt-oss
// subtracts one: maxShift), then slices the sink column off and casts
// the rest to v's dtype: F.softmax(torch.cat([scores, sinks], -1),
// -1)[..., :-1].to(value_states.dtype). FlintPreTrainedModel's
// _keep_in_fp32_modules_strict lists "sinks", so a bf16 load keeps them
// fp32.

// sinksDType is the sinks parameter's dtype: fp32 when kept so, else the
// parameters'.
func (a *Attention) sinksDType(b *core.Builder) units.DType {
	if a.KeepSinksFP32 {
		keepParamFP32(b, "sinks")
		return units.FP32
	}
	return b.Prec.Params
}

// sinkSliceCast is probs[..., :-1].to(dt): a view, then a copy of the
// [batch, heads, seq, seq] part alone in dt (the P.V matmul saves it);
// nothing when probs are in dt already (the matmul reads the view).
func sinkSliceCast(b *core.Builder, p core.Value, scoreShape []int64, dt units.DType) core.Value {
	if b.Dtype(p) == dt {
		return p
	}
	i := b.AddOp("cast", "to_"+dt.Name(), []core.Value{p})
	y := b.Out(i, "probs."+dt.Name(), scoreShape, dt, "attention probabilities less the sink column, cast to v's dtype")
	b.Op(i).Bytes += float64(b.Val(y).Bytes) * float64(units.FP32.Bytes(1)) / float64(dt.Bytes(1))
	return y
}
