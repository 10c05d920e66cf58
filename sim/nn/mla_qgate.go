package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// qGate lowers A.X-K2's query path (MLA.QGate; AXK2Attention.forward,
// models/axk2/modular_axk2.py at 5.25.0): q_compressed = q_a_proj(x),
// q_resid = q_a_layernorm(q_compressed), then q_gate_proj over
// torch.cat([q_resid, q_compressed]) (a new tensor, which the projection
// saves), viewed per head and split into q (qk_nope_head_dim +
// qk_rope_head_dim) and the gate (v_head_dim). It returns the
// projection's output, whose q part the rope and the concatenations read
// as views and whose gate part outputGate reads, and q_resid, the
// indexer's query input.
func (a *MLA) qGate(b *core.Builder, xg core.Value, h int64) (qg, qa core.Value) {
	qc := b.Linear("q_a_proj", core.RoleQ, xg, a.Dim, a.QLoraRank, a.Bias)
	qa = b.RmsNorm("q_a_layernorm", qc, a.QLoraRank)
	s := b.Shape(qc)
	in := b.Ew("cat", "q_gate_input", []core.Value{qa, qc}, core.WithLast(s, 2*a.QLoraRank), b.Dtype(qa),
		"torch.cat([q_resid, q_compressed]): q_gate_proj's input")
	w := a.qkDim() + a.VDim
	qg = b.ColLinear("q_gate_proj", core.RoleQ, in, in, 2*a.QLoraRank, a.Heads*w, h*w, false)
	return qg, qa
}

// outputGate lowers (attn_output * sigmoid(gate_states.float())).to(dtype)
// before o_proj: the gate's reshape copies the strided split (saved by
// nothing), its fp32 cast a copy where the model is not fp32, sigmoid
// saves its fp32 output, the product saves both factors and is fp32, and
// its cast back is o_proj's input.
func (a *MLA) outputGate(b *core.Builder, qg, merged core.Value, h int64) core.Value {
	s := b.Shape(merged)
	dt := b.Dtype(merged)
	g := b.Ew("contiguous", "gate_states", []core.Value{qg}, core.WithLast(s, h*a.VDim), b.Dtype(qg),
		"gate_states.reshape(batch, seq, -1): a copy of the strided split")
	if b.Dtype(g) != units.FP32 {
		g = b.Cast(g, units.FP32, "gate_states.float()")
	}
	i := b.AddOp("sigmoid", "gate", []core.Value{g})
	sg := b.Out(i, "gate_sigmoid", b.Shape(g), units.FP32, "sigmoid(gate_states.float()), saved by sigmoid and the product")
	b.Save(i, sg)
	b.Op(i).Flops = 4 * float64(core.Numel(b.Shape(g)))
	out := b.Mul("gated", merged, sg)
	if dt != units.FP32 {
		out = b.Cast(out, dt, "the gated output cast back to the hidden state's dtype: o_proj's input")
	}
	return out
}
