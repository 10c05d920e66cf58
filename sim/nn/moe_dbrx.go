package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// DBRX's experts and router noise, as transformers 5.25.0 runs them
// (models/dbrx/modeling_dbrx.py: DbrxExpertGLU, DbrxExperts, DbrxRouter).
//
// DbrxExpertGLU holds w1, v1 and w2 as nn.Parameters of [experts x
// ffn_hidden_size, hidden_size] each; DbrxExperts loops over the experts
// hit (its own loop, not @use_experts_implementation: experts_implementation
// does not reach it), taking expert e's rows as views
// (self.mlp.w1.view(-1, ffn_hidden_size, hidden_size)[expert_idx]), and
// runs x.matmul(w1_e.T), x.matmul(v1_e.T), act(gate) * up, then
// .matmul(w2_e): what autograd saves is transformers 5's eager loop's
// (moe_loop.go; gate and up two [rows, hidden] outputs where the fused
// gate_up_proj makes one of twice the width, the same bytes), the
// weights' views excluded (they are the parameters' storage). Each pass
// syncs the host five times, as the eager loop does: the 0-dim index of
// expert_mask and torch.where's nonzero, then the three weight views
// (fusedSyncs each); DbrxExperts has no sentinel check.

// registerGLU registers GLUParams' three 2-D expert parameters under
// mlp (in the experts' scope): w1 the gate, v1 the up projection, w2 the
// down projection, each [experts x hidden, dim] on this rank.
func (m *MoE) registerGLU(b *core.Builder) fusedWeights {
	defer b.Scope("mlp")()
	tp := b.Par.Etpn()
	E := m.Experts / b.Par.Epn()
	h := m.Hidden / tp
	if b.QuantizesExperts() {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "quant_experts=True on separate gate and up expert weights (w1, v1, w2) is not modelled",
			Hint: "drop quant_experts (the experts then stay in 16 bit)"}})
	}
	fw := fusedWeights{gateUpBias: -1, downBias: -1, gateUpLoRA: core.NoValue, downLoRA: core.NoValue, gateUpQ: core.NoValue, downQ: core.NoValue}
	reg := func(name string, role core.Role) int32 {
		p := b.Param(name, []int64{E * h, m.Dim}, role)
		b.ShardParam(p, m.Experts*m.Hidden*m.Dim)
		return p
	}
	fw.gateUp = reg("w1", RoleExpertGate)
	fw.up = reg("v1", RoleExpertUp)
	fw.down = reg("w2", RoleExpertDown)
	return fw
}

// jitter is DbrxRouter's noise in training (moe_jitter_eps set, 0.0
// included): hidden_states *= torch.empty_like(hidden_states).uniform_(1
// - eps, 1 + eps), in place on the block's input, which the router and
// the experts then read. The multiply keeps the noise for the input's
// gradient (MulBackward0 saves other when self requires grad): one [tokens,
// dim] tensor in the activations' dtype. The in-place product is lowered
// as a new tensor, the input freed after it (nothing else reads it): the
// same bytes saved, one [tokens, dim] more for the multiply's duration.
func (m *MoE) jitter(b *core.Builder, x core.Value) core.Value {
	if b.Eval {
		return x
	}
	defer b.Scope("router")()
	noise := b.Ew("uniform", "jitter_noise", nil, b.Shape(x), b.Dtype(x), "router jitter noise (empty_like(hidden_states).uniform_)")
	b.Val(noise).Grad = false
	return b.Mul("jitter", x, noise)
}
