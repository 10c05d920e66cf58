package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention.OutputGate is the gated attention of Qwen3-Next and Qwen3.5
// (transformers' Qwen3NextAttention.forward, modeling_qwen3_next.py at
// 5.17.0; Qwen3_5Attention is the same): q_proj yields 2 x head_dim per
// head,
//
//	query, gate = chunk(q_proj(x).view(..., heads, 2 * head_dim), 2, -1)
//	gate = gate.reshape(..., heads * head_dim)   # a copy: gate is a strided view
//	out = attention(q_norm(query), ...) * sigmoid(gate)
//	o_proj(out)
//
// sigmoid saves its output and the product saves both operands, so a
// gated layer keeps two more [tokens, heads x head_dim] tensors than
// Qwen3's (the gate's sigmoid and the product, which o_proj saves in
// place of the attention output; the attention output itself the kernel
// already keeps). q_norm reads its half of q_proj's output through the
// view (RmsNormSlice: the fp32 copy reads the slice).

// Attention.GateProj is AFMoE's gated attention (AfmoeAttention.forward,
// modular_afmoe.py at transformers 5.25.0): the gate is a projection of
// its own,
//
//	gate = gate_proj(x)                       # Linear(dim, heads * head_dim, bias=False)
//	out = attention(...).view(..., heads * head_dim).contiguous()
//	o_proj(out * sigmoid(gate))
//
// so it keeps what OutputGate's keeps (the sigmoid and the product) with
// no copy of the gate: gate_proj's output is contiguous.

// checkGateProj: the two gates exclude each other, and OutputGate's
// q_proj halves are normed by Llama's or Gemma's RMSNorm, or not at all.
func (a *Attention) checkGateProj(path string) error {
	if a.GateProj && a.OutputGate {
		return &units.Error{Path: path, Msg: "output_gate is either q_proj's second half (Qwen3-Next) or a gate_proj of its own (AFMoE), not both",
			Hint: "pick one: output_gate=True or output_gate=\"gate_proj\""}
	}
	if a.GateBias && !a.GateProj {
		return &units.Error{Path: path, Msg: "a gate bias is gate_proj's (output_gate=\"gate_proj\")",
			Hint: "set output_gate=\"gate_proj\" or leave the gate's bias out"}
	}
	if a.GateProj && a.FusedQKV {
		return &units.Error{Path: path, Msg: "output_gate=\"gate_proj\" is modelled with separate q, k and v projections (AFMoE's)",
			Hint: "set fused_qkv=False"}
	}
	if a.GateSigmoid && (a.GateSoftplus || a.GateProj || a.OutputGate) {
		return &units.Error{Path: path, Msg: "LFM3's sigmoid gate (g_proj) is modelled alone, without another output gate",
			Hint: "pick one gate"}
	}
	if a.GateSoftplus && (a.GateProj || a.OutputGate) {
		return &units.Error{Path: path, Msg: "Laguna's softplus gate (g_proj) is modelled alone, without output_gate",
			Hint: "pick one gate"}
	}
	if a.OutputGate && (a.QKNormWide || a.QKNormAfterRope || a.QKNormCohere) {
		return &units.Error{Path: path, Msg: "output_gate=True is modelled with no qk-norm or one RMSNorm over each head of q and k (Qwen3-Next's), not a norm over all heads",
			Hint: "use qk_norm=True or leave qk_norm out"}
	}
	if a.QKNormOlmo2 && (!a.QKNorm || a.QKNormGemma || a.QKNormCohere || a.OutputGate) {
		return &units.Error{Path: path, Msg: "OLMo 2's RMSNorm over each head (qk_norm=\"olmo2_head\") is modelled alone, without output_gate=True",
			Hint: "use qk_norm=\"olmo2_head\" with output_gate=\"gate_proj\" or no gate"}
	}
	return nil
}

// gatedQ lowers q_proj with its gate: the normed query [..., h*d] and
// the gate's contiguous copy [..., h*d] (reshape of the strided half).
// Without QKNorm (MiniCPM5MoeAttention.forward, modeling_minicpm5_moe.py
// at transformers 5.25.0: q_gate_proj, chunk, the query half transposed
// and rotated as it is) the query is the strided half itself, a view of
// the projection's output that the rotary embedding reads (as a fused
// qkv projection's q is).
func (a *Attention) gatedQ(b *core.Builder, x, xg core.Value, s []int64, h, d int64) (q, gate core.Value) {
	full := b.ColLinear(nameOr(a.QKVNames[0], "q_proj"), core.RoleQ, x, xg, a.Dim, 2*a.Heads*d, 2*h*d, a.QKVBias)
	gate = b.Ew("copy", "gate", []core.Value{full}, core.WithLast(s, h*d), b.Dtype(full),
		"the output gate, reshape's copy of q_proj's second half")
	if !a.QKNorm {
		return full, gate
	}
	rows := append(append([]int64(nil), s[:len(s)-1]...), h, 2*d)
	b.Val(full).Shape = rows
	if a.QKNormGemma {
		q = gemmaNormSlice(b, "q_norm", full, d)
	} else {
		q = b.RmsNormSlice("q_norm", full, d)
	}
	b.Val(full).Shape = core.WithLast(s, 2*h*d)
	b.Val(q).Shape = core.WithLast(s, h*d)
	return q, gate
}

// outputGate is attn_output * sigmoid(gate), o_proj's input.
func outputGate(b *core.Builder, o, gate core.Value) core.Value {
	sg := b.Unary("sigmoid", gate, false, true)
	return b.Mul("gated", o, sg)
}

// Attention.GateSoftplus is Laguna's gated attention
// (LagunaAttention.forward, modular_laguna.py at transformers 5.25.0):
//
//	gate = softplus(g_proj(x).float()).to(out.dtype)  # [..., heads] or [..., heads * head_dim]
//	out = (out.view(..., heads, head_dim) * gate.unsqueeze(-1)).view(...)  # per head
//	o_proj(out)
//
// softplus saves its input, the fp32 copy of g_proj's output (g_proj's
// output itself in an fp32 model); the product saves the attention
// output and the gate cast back; o_proj saves the product.

// Attention.GateSigmoid is LFM3's gated attention (Lfm3Attention.forward,
// modeling_lfm3.py at transformers 5.25.0):
//
//	out = out * torch.sigmoid(g_proj(x)).unsqueeze(-1)  # g_proj: Linear(dim, heads), no bias
//	o_proj(out.reshape(..., heads * head_dim))
//
// sigmoid runs in the activations' dtype and saves its output, [...,
// heads]; the product saves the attention output and that gate
// (outputGate), and o_proj the product.

// gateWidth is g_proj's output width for h heads of d.
func (a *Attention) gateWidth(h, d int64) int64 {
	if a.GatePerHead {
		return h
	}
	return h * d
}

// softplusGate is out * softplus(gate.float()).to(out.dtype), o_proj's
// input.
func softplusGate(b *core.Builder, o, gate core.Value) core.Value {
	g32 := b.Cast(gate, units.FP32, "g_proj(x).float()")
	sp := b.Unary("softplus", g32, true, false)
	return b.Mul("gated", o, b.Cast(sp, b.Dtype(o), "softplus(g).to(attn_output.dtype)"))
}
