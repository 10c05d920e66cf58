package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention.SinkScale is GraniteSWA's attention sink (IBM's
// granite-swash models; eager_attention_forward in
// models/granite_swa/modular_granite_swa.py at transformers 5.25.0): the
// same learned logit per head as gpt-oss's Sinks, which the fused kernels
// take as s_aux, but applied by eager attention after the softmax rather
// than as a column joined to the scores:
//
//	lse = torch.logsumexp(scores, dim=-1)                        # scores: scaled and masked
//	sink_scale = (lse - sinks.view(1, -1, 1)).to(torch.float32).sigmoid()
//	probs = softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
//	out = torch.matmul(probs, v)
//	out = out * sink_scale.unsqueeze(-1).to(out.dtype)
//
// logsumexp saves its input (the masked scores) and its output; sigmoid
// its fp32 output; the product both operands: the P.V matmul's output and
// the scale cast back ([batch, heads, seq, 1]; in fp32 the sigmoid's own
// output). Measured with tools/oracle/hf_block_saved.py (sim/granite_swa_test.go).

// sinkScale lowers sigmoid(logsumexp(scores) - sinks) in fp32 for the
// masked scores of shape [batch, heads, seq, seq].
func (a *Attention) sinkScale(b *core.Builder, scores core.Value, scoreShape []int64) core.Value {
	h := a.Heads
	rowShape := scoreShape[:3]
	i := b.AddOp("logsumexp", "logsumexp", []core.Value{scores})
	lse := b.Out(i, "lse", rowShape, b.Dtype(scores), "each row's logsumexp (saved with its input)")
	b.Save(i, scores, lse)
	b.Op(i).Bytes += float64(b.Val(scores).Bytes)
	b.Op(i).Flops = 4 * float64(core.Numel(scoreShape))
	sink := b.Param("sinks", []int64{h}, core.RoleO)
	b.ShardParam(sink, h*b.Par.Tpn())
	j := b.AddOp("sub", "sinks", []core.Value{lse}, sink)
	diff := b.Out(j, "lse_minus_sink", rowShape, core.Promote(b.Dtype(lse), b.Prec.Params), "logsumexp minus each head's sink")
	b.Op(j).Bytes += float64(b.Val(lse).Bytes)
	b.Op(j).Flops = float64(core.Numel(rowShape))
	diff = b.Cast(diff, units.FP32, "(lse - sinks).to(torch.float32)")
	return b.Unary("sigmoid", diff, false, true)
}

// applySinkScale is out * sink_scale.unsqueeze(-1).to(out.dtype): the
// attention context [batch, heads, seq, head_dim] scaled per row.
func applySinkScale(b *core.Builder, o, scale core.Value) core.Value {
	return b.Mul("sink_scaled", o, b.Cast(scale, b.Dtype(o), "sink_scale.to(attn_output.dtype)"))
}
