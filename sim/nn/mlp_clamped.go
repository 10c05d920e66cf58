package nn

import (
	"github.com/memsh/memsh/sim/core"
)

// fusedClampedGLU is MiniMax M3's MiniMaxM3VLDenseMLP (the dense layers'
// MLP and the MoE block's shared_experts; modeling_minimax_m3_vl.py at
// transformers 5.25.0):
//
//	gate, up = gate_up_proj(x).chunk(2, dim=-1)   # views of one [.., 2h] output
//	gate = gate.clamp(max=limit)                  # saves gate (its storage)
//	up = up.clamp(-limit, limit)                  # saves up (the same storage)
//	glu = gate * sigmoid(gate * alpha)            # sigmoid saves its output, the product both
//	return down_proj((up + 1) * glu)              # the product saves up + 1 and glu
//
// gpt-oss's clamped GLU (clampedGLU) on the halves of the fused
// projection: autograd keeps its [.., 2h] output, the clamped gate, the
// sigmoid, glu and up + 1 (and down_proj its input). Measured with
// tools/oracle/hf_block_saved.py: TestMiniMaxM3SavesAsTransformers.
func fusedClampedGLU(b *core.Builder, x, xg core.Value, dim, hidden, hl int64, bias bool, n mlpNames) core.Value {
	wi := b.ColLinear(n.fused, core.RoleUp, x, xg, dim, 2*hidden, 2*hl, bias)
	half := core.WithLast(b.Shape(wi), hl)
	dt := b.Dtype(wi)
	clamp := func(name string) core.Value {
		i := b.AddOp("clamp", name, []core.Value{wi})
		y := b.Out(i, name, half, dt, "a clamped half of gate_up_proj's output")
		b.Save(i, wi) // its input, a view of the projection's output
		b.Op(i).Strided = true
		b.Op(i).Flops = float64(core.Numel(half))
		b.Op(i).Bytes += float64(dt.Bytes(core.Numel(half)))
		return y
	}
	g, u := clamp("gate"), clamp("up")
	s := b.Unary("sigmoid", b.Unary("mul", g, false, false), false, true) // gate * alpha saves nothing (a scalar)
	glu := b.Mul("glu", g, s)
	h := b.Mul("gated_output", b.Unary("add", u, false, false), glu) // up + 1 saves nothing
	return b.RowLinear(nameOr(n.out, "down_proj"), core.RoleDown, h, hidden, hl, dim, bias)
}
