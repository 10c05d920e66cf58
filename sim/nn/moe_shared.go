package nn

import "github.com/memsh/memsh/sim/core"

// lowerShared runs the shared experts on every token: DeepSeek's
// shared_experts (one MLP), or Qwen2-MoE's shared_expert times
// sigmoid(shared_expert_gate(x)).
//
// Megatron-Core's SharedExpertMLP computes the gate from the layer input
// as the block holds it, sequence-sharded under sequence parallelism
// (megatron/core/transformer/moe/shared_experts.py at core_v0.12.0 and
// core_v0.13.0: forward's F.linear(hidden_states, self.gate_weight), and
// pre_forward_comm's F.linear(input, ...) before the all-gather; the
// gate_weight is marked sequence_parallel so its gradient is all-reduced
// over tp): its output is [tokens/tp, 1], and the input it keeps is the
// one the router keeps already. Elsewhere the gate reads the gathered
// input, as the shared expert's up projections do.
//
// With --moe-shared-expert-overlap (parallel(shared_expert_overlap=True))
// SharedExpertMLP sets its linears' parallel_mode to None and gathers
// their input itself (__init__ and pre_forward_comm, shared_experts.py at
// core_v0.12.0 and core_v0.13.0: gather_from_sequence_parallel_region
// into cached_fc1_input, read by linear_fc1): a plain linear keeps the
// input it reads, so under sequence parallelism the up projection keeps
// the gathered input, not the shard, and its backward gathers nothing
// again. It all runs on SharedExpertMLP.stream (the gate, the gather, both
// linears, the reduce-scatter and the gate's product, each step under
// torch.cuda.stream(self.stream)), and autograd runs each op's backward on
// its forward's stream: their tensors come from that stream's pools.
func (m *MoE) lowerShared(b *core.Builder, x core.Value) core.Value {
	sh := m.shared()
	if b.Par.SharedExpertOverlap && b.MegatronKernels() {
		defer b.KeepGatheredInputs()()
		defer b.OnSideStream()()
	}
	if !m.SharedGate {
		ungated := "shared_experts" // DeepSeek's
		if m.router() == RouterTopKSigmoid {
			ungated = "shared_expert" // Llama4TextMoe's
		}
		defer b.Scope(m.sharedName(ungated))()
		if m.sharedLimit() > 0 {
			return clampedFfn(b, x, m.Dim, sh.Hidden, m.LimitAfterAct)
		}
		if m.ClampedGLU { // MiniMax M3's shared_experts: one gate_up_proj, the clamped GLU (mlp_clamped.go)
			return ffn(b, x, m.Dim, sh.Hidden, "swiglu", sh.Bias, mlpNames{fused: "gate_up_proj", clamped: true})
		}
		if m.SharedUpDown {
			return ffn(b, x, m.Dim, sh.Hidden, m.Act, sh.Bias, mlpNames{in: "up_proj", out: "down_proj"})
		}
		return Ffn(b, x, m.Dim, sh.Hidden, m.Act, sh.Bias)
	}
	done := b.Scope(m.sharedName("shared_expert"))
	y := Ffn(b, x, m.Dim, sh.Hidden, m.Act, sh.Bias)
	done()
	xg := x
	if !b.MegatronKernels() {
		xg = b.TpGather(x)
	}
	gate := b.Linear("shared_expert_gate", "shared_expert_gate", xg, m.Dim, 1, false)
	return b.Mul("shared_gated", Activation(b, "sigmoid", gate), y)
}

// projNames are the expert projections' module names: gate, up, down.
func (m *MoE) projNames() (gate, up, down string) {
	if m.GLUParams {
		return "w1", "v1", "w2"
	}
	if m.WNames {
		return "w1", "w3", "w2"
	}
	if !m.expertMLP().gated() {
		return "", "fc1", "fc2"
	}
	return "gate_proj", "up_proj", "down_proj"
}

func (m *MoE) sharedName(dflt string) string {
	if m.SharedName != "" {
		return m.SharedName
	}
	return dflt
}
