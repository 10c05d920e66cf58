package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// routeSqrtSoftplus lowers DeepseekV4TopKRouter and DeepseekV4HashRouter
// (modeling_deepseek_v4.py at transformers 5.25.0):
//
//	logits = F.linear(x, weight)                  # the compute dtype; keeps x
//	scores = sqrt(softplus(logits))               # softplus keeps logits, sqrt its result
//	idx = topk(scores + e_score_correction_bias)  # keeps idx; or tid2eid[input_ids] (HashVocab)
//	w = scores.gather(1, idx)                     # keeps idx
//	w = w / (w.sum(-1) + 1e-20) * routed_scaling_factor   # the division keeps w and the sum
//
// The weights stay in the logits' dtype.
func (m *MoE) routeSqrtSoftplus(b *core.Builder, x core.Value, r routing) routing {
	T, E, k := r.tokens, m.Experts, m.TopK
	logits := routerParamLinear(b, "gate", x, m.Dim, E, false, m.KeepRouterFP32, routerDType(b, b.Prec.Compute))
	sp := b.Unary("softplus", logits, true, false)
	scores := b.Unary("sqrt", sp, false, true)
	if m.HashVocab > 0 {
		// tid2eid, a persistent int64 buffer of the checkpoint, looked up
		// by the token ids under no gradient.
		b.Buffer("gate.tid2eid", []int64{m.HashVocab, k}, units.INT64, "the hash router's frozen token-to-experts table")
		i := b.AddOp("index", "tid2eid", nil)
		r.idx = b.Out(i, "hash_indices", []int64{T, k}, units.INT64, "the experts tid2eid gives each token")
		b.Val(r.idx).Grad = false
		b.Op(i).NoGradB = true
	} else {
		b.Buffer("gate.e_score_correction_bias", []int64{E}, units.FP32, "auxiliary-loss-free routing bias (kept fp32)")
		r.idx = m.topkIndices(b, scores, T)
	}
	g := b.AddOp("gather", "topk_weights", []core.Value{scores, r.idx})
	w := b.Out(g, "topk_weights", []int64{T, k}, b.Dtype(scores), "selected sqrt-softplus scores")
	b.Save(g, r.idx)
	r.weights = m.normTopK(b, w)
	return r
}

// clampedSwiGLU is DeepSeek-V4's clamped SwiGLU (MoE.SwiGLULimit):
//
//	gate = gate.clamp(max=limit)      # keeps gate
//	up = up.clamp(-limit, limit)      # keeps up
//	return silu(gate) * up            # silu keeps the clamped gate, the product both
//
// or, afterAct (MoE.LimitAfterAct: Ling 3's), silu(gate).clamp(max=limit)
// * up.clamp(-limit, limit): silu keeps gate, the clamps their inputs,
// the product both clamped factors. strided marks the grouped_mm
// experts' gate and up, strided views of one gate_up output.
func clampedSwiGLU(b *core.Builder, gate, up core.Value, strided, afterAct bool) core.Value {
	var g core.Value
	if afterAct {
		act := Activation(b, "silu", gate)
		if strided {
			b.Op(b.Val(act).Producer).Strided = true
		}
		g = b.Unary("clamp", act, true, false)
	} else {
		g = b.Unary("clamp", gate, true, false)
	}
	u := b.Unary("clamp", up, true, false)
	if strided {
		if !afterAct {
			b.Op(b.Val(g).Producer).Strided = true
		}
		b.Op(b.Val(u).Producer).Strided = true
	}
	if afterAct {
		return b.Mul("act_mul", g, u)
	}
	return b.Mul("act_mul", Activation(b, "silu", g), u)
}

// clampedFfn is DeepseekV4MLP (or Ling 3's BailingHybridMLP, afterAct),
// the shared experts: gate_proj and up_proj, clampedSwiGLU, down_proj.
func clampedFfn(b *core.Builder, x core.Value, dim, hidden int64, afterAct bool) core.Value {
	gate := b.Linear("gate_proj", core.RoleGate, x, dim, hidden, false)
	up := b.Linear("up_proj", core.RoleUp, x, dim, hidden, false)
	return b.Linear("down_proj", core.RoleDown, clampedSwiGLU(b, gate, up, false, afterAct), hidden, dim, false)
}

// sharedLimit is the shared experts' clamp (MoE.LimitAfterAct).
func (m *MoE) sharedLimit() float64 {
	if m.LimitAfterAct {
		return m.SharedSwiGLULimit
	}
	return m.SwiGLULimit
}

// gatedAct is the experts' gated activation: act(gate) * up, or
// clampedSwiGLU under SwiGLULimit (every experts implementation lowers
// DeepSeek-V4's clamp: the loop, the grouped and dispatched GEMMs, the
// dense bmm; moe_hf.go's grouped_mm calls clampedSwiGLU with its strided
// halves), or gpt-oss's clampedGLU under ClampedGLU (gpt-oss's and
// MiniMax M3's experts' loop: three more [rows, hidden] tensors kept,
// measured in TestGptOssEagerExpertsAsTransformers and
// TestMiniMaxM3EagerExpertsAsTransformers).
func (m *MoE) gatedAct(b *core.Builder, fn string, gate, up core.Value) core.Value {
	if m.SwiGLULimit > 0 {
		return clampedSwiGLU(b, gate, up, false, m.LimitAfterAct)
	}
	if m.ClampedGLU {
		return clampedGLU(b, gate, up)
	}
	return b.Mul("act_mul", Activation(b, fn, gate), up)
}
