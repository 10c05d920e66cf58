package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MoEDenseBMM and RouterTopKSigmoid are Llama 4's MoE block as
// transformers runs it (Llama4TextMoe, Llama4TextExperts and Llama4Router
// in models/llama4/modeling_llama4.py, the same in the 4.51.0, 5.17.0 and
// 5.25.0 wheels; the experts take no experts_implementation):
//
//	router_logits = router(x)                                  # nn.Linear(dim, experts), [T, E]
//	top, idx = topk(router_logits, top_k, dim=1)               # saves idx
//	scores = full_like(logits, -inf).scatter_(1, idx, top)     # [T, E]
//	scores = sigmoid(scores.float()).to(dtype)                 # saves its fp32 output; unselected experts 0
//	routed_in = x.repeat(E, 1)                                 # [E*T, d]: every token for every expert
//	routed_in = routed_in * scores.T.reshape(-1, 1)            # saves both
//	gate_up = bmm(routed_in.view(E, T, d), gate_up_proj)       # [E, d, 2h]; saves its input
//	gate, up = gate_up.chunk(2); h = up * act(gate)             # act saves gate, the product both
//	out = bmm(h, down_proj)                                    # [E, h, d]; saves h
//	out = shared_expert(x) + out.view(E, T, d).sum(0)
//
// Every expert runs on every token, its rows weighted by a score that is
// zero unless the token chose it: E times the FLOPs of the routed top_k,
// and what autograd keeps grows with E (two [E*T, d] and three [E*T, h]
// tensors a layer, the gate and up halves one [E*T, 2h]). bitsandbytes and
// PEFT's target_modules reach the router and the shared expert (nn.Linear
// modules), not the 3-D experts.
const (
	MoEDenseBMM       = "dense_bmm"
	RouterTopKSigmoid = "topk_sigmoid"
)

// checkDense: the dense experts go with their own router, and are not
// modelled sharded.
func (m *MoE) checkDense(path string) error {
	if (m.impl() == MoEDenseBMM) != (m.router() == RouterTopKSigmoid) {
		return &units.Error{Path: path, Msg: fmt.Sprintf("impl %q and router %q: Llama 4's dense experts and its top-k sigmoid router go together", m.impl(), m.router()),
			Hint: `use impl="dense_bmm" with router="topk_sigmoid" (Llama 4), or neither`}
	}
	return nil
}

// checkDenseLayout refuses the layouts the dense experts are not modelled for.
func (m *MoE) checkDenseLayout(path string, par core.Parallelism) error {
	if m.impl() != MoEDenseBMM || (max(par.EP, 1) == 1 && max(par.TP, 1) == 1) {
		return nil
	}
	return &units.Error{Path: path, Msg: "expert and tensor parallelism are not modelled for Llama 4's dense experts (impl=\"dense_bmm\")",
		Hint: "leave ep and tp at 1 (FSDP shards the experts' weights), or describe the block as moe(impl=\"grouped\")"}
}

// routeTopKSigmoid is Llama4Router: weights [T, E] (zero off the top-k).
func (m *MoE) routeTopKSigmoid(b *core.Builder, x core.Value, r routing) routing {
	T, E, k := r.tokens, m.Experts, m.TopK
	name := m.RouterName
	if name == "" {
		name = "router"
	}
	logits := b.Linear(name, core.RoleRouter, x, m.Dim, E, false)
	dt := b.Dtype(logits)
	tk := b.AddOp("topk", "topk", []core.Value{logits})
	top := b.Out(tk, "router_top_value", []int64{T, k}, dt, "top-k router logits")
	r.idx = b.Out(tk, "router_indices", []int64{T, k}, units.INT64, "top-k expert indices")
	b.Val(r.idx).Grad = false
	b.Save(tk, r.idx)
	sc := b.AddOp("scatter", "router_scores", []core.Value{top, r.idx})
	scores := b.Out(sc, "router_scores", []int64{T, E}, dt, "top-k logits scattered into -inf (full_like(...).scatter_)")
	b.Save(sc, r.idx)
	s32 := b.Cast(scores, units.FP32, "router scores .float()")
	sig := b.Unary("sigmoid", s32, false, true)
	r.weights = b.Cast(sig, dt, "sigmoid scores in the logits' dtype")
	return r
}

// lowerDenseBMM runs every expert on every token (the block's doc above).
func (m *MoE) lowerDenseBMM(b *core.Builder, x core.Value, r routing) core.Value {
	T, E, d, h := r.tokens, m.Experts, m.Dim, m.Hidden
	defer b.Scope("experts")()
	b.ReserveParams(E)
	up := b.Param("gate_up_proj", []int64{E, d, 2 * h}, RoleExpertUp)
	down := b.Param("down_proj", []int64{E, h, d}, RoleExpertDown)
	upQ, downQ := core.NoValue, core.NoValue
	if b.QuantizesExperts() { // Axolotl's quantize_moe_experts (core/quant_experts.go)
		upQ, downQ = b.DequantizedExperts(up), b.DequantizedExperts(down)
	}
	rep := b.Ew("repeat", "routed_in", []core.Value{x}, []int64{E * T, d}, b.Dtype(x), "every token repeated for every expert (x.repeat(E, 1))")
	col := b.Ew("reshape", "router_scores_col", []core.Value{r.weights}, []int64{E * T, 1}, b.Dtype(r.weights), "scores transposed to expert-major rows (a copy)")
	rin := b.Mul("routed_in_scaled", rep, col)
	dt := b.Dtype(rin)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	bmm := func(name string, in core.Value, p int32, inDim, outDim int64) core.Value {
		xin := b.Cast(in, dt, "autocast copy of the bmm input")
		wv, params := b.Weight(p, dt), []int32{p}
		q := downQ
		if p == up {
			q = upQ
		}
		if q != core.NoValue { // the parametrization's dequantized weight, no grad
			wv, params = b.Cast(q, dt, "autocast copy of the dequantized weight"), nil
		}
		ins := []core.Value{xin}
		if wv != core.NoValue {
			ins = append(ins, wv)
		}
		i := b.AddOp("matmul", name, ins, params...) // torch.bmm: E GEMMs of T rows, priced as one of E x T
		y := b.Out(i, name, []int64{E * T, outDim}, dt, "every expert's "+name+" of every token")
		if b.Trainable(p) {
			b.Save(i, xin)
		}
		if b.Grad(xin) {
			b.Save(i, wv)
		}
		b.Op(i).Flops = 2 * float64(E*T) * float64(inDim) * float64(outDim)
		b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(E*inDim*outDim))
		return y
	}
	var hid core.Value
	if m.expertMLP().gated() {
		fn := "silu"
		if m.Act == "geglu" {
			fn = "gelu"
		}
		// gate_up.chunk(2): two views of one [E, T, 2h] output, lowered as
		// its two halves (the same bytes).
		gate := bmm("gate_up_proj.gate", rin, up, d, h)
		upv := bmm("gate_up_proj.up", rin, up, d, h)
		hid = b.Mul("act_mul", upv, Activation(b, fn, gate))
	} else {
		hid = Activation(b, m.Act, bmm("gate_up_proj", rin, up, d, h))
	}
	y := bmm("down_proj", hid, down, h, d)
	sm := b.AddOp("sum", "routed_out", []core.Value{y})
	out := b.Out(sm, "routed_out", []int64{T, d}, b.Dtype(y), "every expert's weighted output summed per token")
	b.Op(sm).Flops = float64(E * T * d)
	if upQ != core.NoValue { // the experts' forward hook clears the parametrization cache
		b.HoldDequantized(upQ, downQ)
	}
	return out
}
